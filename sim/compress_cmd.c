/*
** compress_cmd.c: `lorasim compress`, an adapter collection in, an
** immutable shared-basis bundle out (docs/COMPRESSION.md).
**
**   lorasim compress --in COLLECTION.json --out BUNDLE.json [fit options]
**   lorasim compress --synthetic N [synthetic options] --out BUNDLE.json
**   lorasim compress ... --report [--ranks 2,4,8] [--clusters-list 1,2,4]
**   lorasim compress --verify BUNDLE.json
**
** The collection is read and checked completely (shapes, factor
** orientation, the optional manifest probe y = s B A x of every adapter)
** before anything is fitted; input errors exit 2 with one line naming the
** file and the JSON path and a stable code.  The bundle is written beside
** the target and renamed into place only after everything succeeded, so a
** failed run leaves no file.  --verify re-derives every digest of a bundle
** from its contents and fails with E_CMP_BUNDLE_DIGEST on any mismatch.
*/
#include "compress_cmd.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bundle_impl.h"
#include "cli.h"
#include "json.h"
#include "slurp.h"
#include "outfile.h"
#include "../compress/jd.h"
#include "../compress/ledger.h"
#include "../compress/synth.h"

static cJSON *lsim__hex(const lsim_digest *d) {
  char h[LSIM_DIGEST_HEX_SIZE];
  return cJSON_CreateString(lsim_digest_hex(d, h));
}

/* A number written with 17 significant digits, so that reading it back
** gives the same binary64 (cJSON's own printer rounds to 15 digits
** whenever they compare equal within its epsilon, which would change the
** digests a reader re-derives). */
static cJSON *lsim__num(double d) {
  char buf[40];
  snprintf(buf, sizeof buf, "%.17g", d == 0 ? 0.0 : d);
  return cJSON_CreateRaw(buf);
}

static void lsim__addnum(cJSON *o, const char *key, double d) {
  cJSON_AddItemToObject(o, key, lsim__num(d));
}

static cJSON *lsim__matrix(const double *m, int rows, int cols) {
  cJSON *a = cJSON_CreateArray();
  for (int i = 0; a && i < rows; i++) {
    cJSON *row = cJSON_CreateArray();
    for (int j = 0; row && j < cols; j++)
      cJSON_AddItemToArray(row, lsim__num(m[(size_t)i * cols + j]));
    cJSON_AddItemToArray(a, row);
  }
  return a;
}

static cJSON *lsim__bundle_json(const lsim_bundle_coll *c, const lsim_jd_config *cfg,
                                const lsim_jd_result *r,
                                const lsim_bundle_ids *b) {
  cJSON *o = cJSON_CreateObject();
  char seed[32];
  snprintf(seed, sizeof seed, "%llu", (unsigned long long)cfg->seed);
  cJSON_AddStringToObject(o, "format", "lorasim-jd-bundle");
  cJSON_AddNumberToObject(o, "version", 1);
  cJSON_AddItemToObject(o, "bundle_sha256", lsim__hex(&b->id));
  cJSON_AddStringToObject(o, "base", c->base);
  cJSON_AddStringToObject(o, "module", c->module);
  cJSON_AddStringToObject(o, "method", lsim_jd_method_name(r->method));
  cJSON_AddNumberToObject(o, "d_in", r->d_in);
  cJSON_AddNumberToObject(o, "d_out", r->d_out);
  cJSON_AddNumberToObject(o, "rank", r->R);
  cJSON_AddNumberToObject(o, "clusters", r->k);
  cJSON_AddNumberToObject(o, "max_iterations", cfg->max_iterations);
  cJSON_AddNumberToObject(o, "max_rounds", cfg->max_rounds);
  cJSON_AddStringToObject(o, "seed", seed);
  cJSON_AddStringToObject(o, "normalization", "unit-frobenius");
  cJSON_AddItemToObject(o, "source_set_sha256", lsim__hex(&b->set));
  cJSON *srcs = cJSON_AddArrayToObject(o, "sources");
  for (int i = 0; i < r->n; i++) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddStringToObject(s, "name", c->names[i]);
    cJSON_AddItemToObject(s, "sha256", lsim__hex(&b->src[i]));
    cJSON_AddNumberToObject(s, "rank", b->ranks[i]);
    lsim__addnum(s, "scale", b->scales[i]);
    lsim__addnum(s, "norm", r->norm[i]);
    lsim__addnum(s, "err2", r->err2[i]);
    cJSON_AddNumberToObject(s, "cluster", r->cluster[i]);
    cJSON_AddItemToObject(s, "core_sha256", lsim__hex(&b->cores[i]));
    cJSON_AddItemToArray(srcs, s);
  }
  cJSON *bases = cJSON_AddArrayToObject(o, "bases");
  for (int k = 0; k < r->k; k++) {
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "cluster", k);
    cJSON_AddItemToObject(s, "sha256", lsim__hex(&b->bases[k]));
    cJSON_AddItemToObject(s, "U", lsim__matrix(r->U + (size_t)k * r->d_out *
                                                          r->R,
                                               r->d_out, r->R));
    cJSON_AddItemToObject(s, "V", lsim__matrix(r->V + (size_t)k * r->d_in *
                                                          r->R,
                                               r->d_in, r->R));
    cJSON_AddItemToArray(bases, s);
  }
  cJSON_AddItemToObject(o, "cores",
                        lsim__matrix(r->cores, r->n, r->core_len));
  cJSON *m = cJSON_AddObjectToObject(o, "metrics");
  cJSON_AddNumberToObject(m, "iterations", r->iterations);
  cJSON_AddNumberToObject(m, "rounds", r->rounds);
  cJSON_AddBoolToObject(m, "converged", r->converged);
  lsim__addnum(m, "total_err2", r->total_err2);
  lsim__addnum(m, "total_norm2", r->total_norm2);
  lsim__addnum(m, "rel_err", r->total_err2 / r->total_norm2);
  return o;
}

static lsim_err lsim__write_atomic(const char *path, const char *text,
                                   lsim_errbuf *eb) {
  /* sim/outfile.h: a temporary beside it (O_EXCL|O_NOFOLLOW), every write
  ** checked, renamed into place; a link or a device node is refused */
  lsim_outfile of;
  lsim_err rc = lsim_out_open(&of, path, eb);
  if (rc)
    return rc;
  if (fputs(text, of.fp) < 0 || fputc('\n', of.fp) == EOF) {
    rc = lsim_fail(eb, LSIM_E_OUT_WRITE, "%s: write failed: %s", path,
                   strerror(errno));
    lsim_out_abort(&of);
    return rc;
  }
  return lsim_out_commit(&of, eb);
}

/* ---- the report ------------------------------------------------------------ */

/* Measured kernel times (tools/gpu_compress.sh writes them): one line per
** configuration, "METHOD R K JD_MS LORA_MS TOKENS"; '#' starts a comment. */
typedef struct lsim__ktime {
  int method, R, k, tokens;
  double jd_ms, lora_ms;
} lsim__ktime;

static lsim_err lsim__read_times(const char *file, lsim__ktime **out, int *n,
                                 lsim_errbuf *eb) {
  *out = NULL;
  *n = 0;
  FILE *f = fopen(file, "r");
  if (!f)
    return errno == ENOENT || errno == ENOTDIR
               ? lsim_fail(eb, LSIM_E_FILE_MISSING,
                           "%s: no such file or directory", file)
               : lsim_fail(eb, LSIM_E_IO, "%s: cannot open: %s", file,
                           strerror(errno));
  char line[512], meth[32];
  int cap = 0, ln = 0;
  lsim_err rc = 0;
  while (fgets(line, sizeof line, f)) {
    ln++;
    char *h = strchr(line, '#');
    if (h)
      *h = 0;
    if (strspn(line, " \t\r\n") == strlen(line))
      continue;
    lsim__ktime t;
    char tail;
    if (sscanf(line, "%31s %d %d %lf %lf %d %c", meth, &t.R, &t.k, &t.jd_ms,
               &t.lora_ms, &t.tokens, &tail) != 6 ||
        !(t.method = lsim_jd_method_find(meth)) || t.R < 1 || t.k < 1 ||
        !(t.jd_ms > 0) || !(t.lora_ms > 0) || t.tokens < 1) {
      rc = lsim_fail(eb, LSIM_E_CMP_TYPE,
                     "%s:%d: want METHOD R K JD_MS LORA_MS TOKENS", file, ln);
      break;
    }
    if (*n == cap) {
      cap = cap ? 2 * cap : 16;
      lsim__ktime *nt = realloc(*out, sizeof *nt * (size_t)cap);
      if (!nt) {
        rc = lsim_fail(eb, LSIM_E_NOMEM, "kernel times");
        break;
      }
      *out = nt;
    }
    (*out)[(*n)++] = t;
  }
  fclose(f);
  if (rc) {
    free(*out);
    *out = NULL;
    *n = 0;
  }
  return rc;
}

static int lsim__parse_list(const char *s, int *out, int max) {
  int n = 0;
  while (*s && n < max) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > LSIM_BUNDLE_MAX_DIM)
      return -1;
    out[n++] = (int)v;
    s = end;
    if (*s == ',')
      s++;
    else if (*s)
      return -1;
  }
  return *s ? -1 : n;
}

/*
** Resident bytes (FP16 parameters plus one int32 assignment per adapter
** when clustered), the bytes to bring one cold adapter to a device whose
** bases are resident, and the reconstruction error, across R and k.
** Kernel time is never inferred from bytes: it stays "not measured".
*/
static lsim_err lsim__report(const lsim_bundle_coll *c, const lsim_jd_config *base,
                             const int *ranks, int nr, const int *ks, int nk,
                             const lsim__ktime *kt, int nkt,
                             lsim_errbuf *eb) {
  int r0 = 0;
  for (int i = 0; i < c->n; i++)
    if (c->src[i].rank > r0)
      r0 = c->src[i].rank;
  int64_t S = (int64_t)c->d_in + c->d_out, lora_params = 0;
  for (int i = 0; i < c->n; i++)
    lora_params += (int64_t)c->src[i].rank * S;
  printf("collection: %d adapters, d_in %d, d_out %d, max source rank %d\n",
         c->n, c->d_in, c->d_out, r0);
  printf("ordinary LoRA: resident %lld B, per-adapter transfer %lld B "
         "(fp16), error 0\n\n",
         (long long)(2 * lora_params), (long long)(2 * (int64_t)r0 * S));
  printf("%-8s %4s %3s %14s %8s %12s %12s %12s %9s  %s\n", "method", "R", "k",
         "resident_B", "vs_lora", "adapter_B", "basis_B", "rel_err",
         "converged", "kernel_time");
  for (int m = LSIM_JD_FULL; m <= LSIM_JD_DIAG; m++)
    for (int a = 0; a < nr; a++)
      for (int b = 0; b < nk; b++) {
        lsim_jd_config cfg = *base;
        cfg.method = m;
        cfg.rank = ranks[a];
        cfg.clusters = ks[b];
        lsim_jd_result r = LSIM_JD_RESULT_INIT;
        lsim_errbuf e2 = LSIM_ERRBUF_INIT;
        lsim_err rc =
            lsim_jd_fit(c->src, c->n, c->d_in, c->d_out, &cfg, &r, &e2);
        if (rc == LSIM_E_CMP_RANK || rc == LSIM_E_CMP_CLUSTERS) {
          printf("%-8s %4d %3d  skipped: %s\n", lsim_jd_method_name(m),
                 ranks[a], ks[b], e2.msg);
          continue;
        }
        if (rc) {
          *eb = e2;
          return rc;
        }
        lsim_jd_ledger L;
        if ((rc = lsim_jd_ledger_count(c->n, r0, c->d_in, c->d_out, ranks[a],
                                       ks[b], &L, eb))) {
          lsim_jd_result_release(&r);
          return rc;
        }
        int64_t params = m == LSIM_JD_FULL ? L.full_k : L.diag_k;
        int64_t bytes = 2 * params + (ks[b] > 1 ? 4 * (int64_t)c->n : 0);
        int64_t core_b = 2 * (int64_t)r.core_len;
        int64_t basis_b = 2 * (int64_t)ranks[a] * S;
        char kbuf[160];
        snprintf(kbuf, sizeof kbuf, "not measured");
        for (int t = 0; t < nkt; t++)
          if (kt[t].method == m && kt[t].R == ranks[a] && kt[t].k == ks[b])
            snprintf(kbuf, sizeof kbuf,
                     "jd %.4f ms, lora %.4f ms (%d tokens, cited: a GPU "
                     "measurement read from --kernel-times)",
                     kt[t].jd_ms, kt[t].lora_ms, kt[t].tokens);
        printf("%-8s %4d %3d %14lld %8.4f %12lld %12lld %12.4e %9s  %s\n",
               lsim_jd_method_name(m), ranks[a], ks[b], (long long)bytes,
               (double)bytes / (double)(2 * lora_params), (long long)core_b,
               (long long)basis_b, r.total_err2 / r.total_norm2,
               r.converged ? "yes" : "no", kbuf);
        lsim_jd_result_release(&r);
      }
  printf("\nresident_B: bases and cores in fp16 (+4 B cluster id per adapter "
         "when k > 1);\nadapter_B: one cold adapter's core with its basis "
         "resident; basis_B: one cluster's U and V.\nkernel_time: only from "
         "a GPU measurement (--kernel-times, written by "
         "tools/gpu_compress.sh);\nfewer bytes are never reported as lower "
         "latency.\n");
  return 0;
}

/* ---- the command ------------------------------------------------------------ */

static void lsim__usage(FILE *f) {
  fputs(
      "usage: lorasim compress (--in COLLECTION.json | --synthetic N) [options]\n"
      "       lorasim compress --verify BUNDLE.json\n"
      "\n"
      "Fit shared bases and per-adapter cores to an adapter collection\n"
      "(JD-Full or JD-Diag, optionally clustered) and write an immutable\n"
      "bundle; print its identity and reconstruction metrics.\n"
      "\n"
      "fit options:\n"
      "  --out PATH          bundle to write (JSON; replaced atomically)\n"
      "  --method NAME       jd-full (default) or jd-diag\n"
      "  --rank R            shared rank (default 4)\n"
      "  --clusters K        clusters (default 1)\n"
      "  --max-iter N        iterations per cluster fit (default 10)\n"
      "  --max-rounds N      refit/reassign rounds (default 50)\n"
      "  --seed N            k-means++ seed (default 1)\n"
      "synthetic collection (instead of --in):\n"
      "  --synthetic N       N adapters\n"
      "  --d-in D --d-out D  module shape (default 64 x 64)\n"
      "  --src-rank r0       rank of every adapter (default 8)\n"
      "  --planted P         planted shared rank (default 8)\n"
      "  --groups G          planted groups (default 1)\n"
      "  --structure S       full (default) or diag\n"
      "  --noise s           independent noise per factor entry (default 0)\n"
      "  --synth-seed N      generator seed (default 1)\n"
      "report:\n"
      "  --report            table of bytes and error across --ranks and\n"
      "                      --clusters-list for both methods (no bundle)\n"
      "  --ranks LIST        e.g. 2,4,8 (default: --rank)\n"
      "  --clusters-list L   e.g. 1,2,4 (default: --clusters)\n"
      "  --kernel-times FILE measured GPU times (METHOD R K JD_MS LORA_MS\n"
      "                      TOKENS per line); otherwise 'not measured'\n"
      "\n"
      "exit status: 0 ok, 1 fitting failed, 2 bad usage or input\n",
      f);
}

static int lsim__fail_out(const char *file, const lsim_bundle_coll *c,
                          const lsim_errbuf *eb, int status) {
  if (c && c->path[0]) {
    char msg[sizeof eb->msg + 1100];
    snprintf(msg, sizeof msg, "%s: %s", file, eb->msg);
    lsim_cli_report_at(stderr, eb->code, c->path, msg);
  } else {
    lsim_cli_report_at(stderr, eb->code, NULL, eb->msg);
  }
  return status;
}

static int lsim__posint(const char *s, int lo, int hi, int *out) {
  char *end;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (end == s || *end || errno || v < lo || v > hi)
    return -1;
  *out = (int)v;
  return 0;
}

int lsim_compress_main(int argc, char **argv) {
  enum { O_IN = 256, O_OUT, O_METHOD, O_RANK, O_CLUSTERS, O_ITER, O_ROUNDS,
         O_SEED, O_SYN, O_DIN, O_DOUT, O_SRANK, O_PLANTED, O_GROUPS,
         O_STRUCT, O_NOISE, O_SSEED, O_REPORT, O_RANKS, O_KS, O_VERIFY,
         O_KTIMES };
  static const struct option opts[] = {
      {"in", required_argument, NULL, O_IN},
      {"out", required_argument, NULL, O_OUT},
      {"method", required_argument, NULL, O_METHOD},
      {"rank", required_argument, NULL, O_RANK},
      {"clusters", required_argument, NULL, O_CLUSTERS},
      {"max-iter", required_argument, NULL, O_ITER},
      {"max-rounds", required_argument, NULL, O_ROUNDS},
      {"seed", required_argument, NULL, O_SEED},
      {"synthetic", required_argument, NULL, O_SYN},
      {"d-in", required_argument, NULL, O_DIN},
      {"d-out", required_argument, NULL, O_DOUT},
      {"src-rank", required_argument, NULL, O_SRANK},
      {"planted", required_argument, NULL, O_PLANTED},
      {"groups", required_argument, NULL, O_GROUPS},
      {"structure", required_argument, NULL, O_STRUCT},
      {"noise", required_argument, NULL, O_NOISE},
      {"synth-seed", required_argument, NULL, O_SSEED},
      {"report", no_argument, NULL, O_REPORT},
      {"ranks", required_argument, NULL, O_RANKS},
      {"clusters-list", required_argument, NULL, O_KS},
      {"verify", required_argument, NULL, O_VERIFY},
      {"kernel-times", required_argument, NULL, O_KTIMES},
      {"help", no_argument, NULL, 'h'},
      {NULL, 0, NULL, 0}};
  const char *in = NULL, *out = NULL, *verify = NULL, *ranks_s = NULL,
             *ks_s = NULL, *ktimes = NULL;
  lsim_jd_config cfg = LSIM_JD_CONFIG_INIT;
  cfg.rank = 4;
  lsim_jd_synth syn = {0, 64, 64, 8, 8, 1, LSIM_SYNTH_FULL, 0, 1};
  int report = 0, bad = 0, c;
  optind = 1;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    char *end;
    switch (c) {
    case O_IN: in = optarg; break;
    case O_OUT: out = optarg; break;
    case O_VERIFY: verify = optarg; break;
    case O_METHOD:
      bad |= !(cfg.method = lsim_jd_method_find(optarg));
      break;
    case O_RANK: bad |= lsim__posint(optarg, 1, 65536, &cfg.rank); break;
    case O_CLUSTERS:
      bad |= lsim__posint(optarg, 1, LSIM_BUNDLE_MAX_N, &cfg.clusters);
      break;
    case O_ITER: bad |= lsim__posint(optarg, 1, 100000, &cfg.max_iterations); break;
    case O_ROUNDS: bad |= lsim__posint(optarg, 1, 100000, &cfg.max_rounds); break;
    case O_SEED:
      errno = 0;
      cfg.seed = strtoull(optarg, &end, 10);
      bad |= *optarg == '-' || end == optarg || *end || errno;
      break;
    case O_SYN: bad |= lsim__posint(optarg, 1, LSIM_BUNDLE_MAX_N, &syn.n); break;
    case O_DIN: bad |= lsim__posint(optarg, 1, 65536, &syn.d_in); break;
    case O_DOUT: bad |= lsim__posint(optarg, 1, 65536, &syn.d_out); break;
    case O_SRANK:
      bad |= lsim__posint(optarg, 1, LSIM_JD_MAX_SOURCE_RANK, &syn.r0);
      break;
    case O_PLANTED: bad |= lsim__posint(optarg, 1, 4096, &syn.planted); break;
    case O_GROUPS: bad |= lsim__posint(optarg, 1, LSIM_BUNDLE_MAX_N, &syn.groups); break;
    case O_STRUCT:
      syn.structure = strcmp(optarg, "full") == 0   ? LSIM_SYNTH_FULL
                      : strcmp(optarg, "diag") == 0 ? LSIM_SYNTH_DIAG
                                                    : 0;
      bad |= !syn.structure;
      break;
    case O_NOISE:
      errno = 0;
      syn.noise = strtod(optarg, &end);
      bad |= end == optarg || *end || errno || !(syn.noise >= 0);
      break;
    case O_SSEED:
      errno = 0;
      syn.seed = strtoull(optarg, &end, 10);
      bad |= *optarg == '-' || end == optarg || *end || errno;
      break;
    case O_REPORT: report = 1; break;
    case O_RANKS: ranks_s = optarg; break;
    case O_KS: ks_s = optarg; break;
    case O_KTIMES: ktimes = optarg; break;
    case 'h': lsim__usage(stdout); return 0;
    default: lsim__usage(stderr); return 2;
    }
    if (bad) {
      fprintf(stderr, "lorasim: error E_USAGE: bad value '%s' for an option "
                      "of compress\n", optarg ? optarg : "");
      return 2;
    }
  }
  int modes = !!in + !!syn.n + !!verify;
  if (optind != argc || modes != 1 || (verify && (out || report)) ||
      (!verify && !report && !out)) {
    fprintf(stderr, "lorasim: error E_USAGE: compress needs exactly one of "
                    "--in, --synthetic, --verify, and --out unless --report "
                    "or --verify\n");
    lsim__usage(stderr);
    return 2;
  }
  lsim_errbuf eb = LSIM_ERRBUF_INIT;
  lsim_bundle_coll col;
  memset(&col, 0, sizeof col);
  const char *file = in ? in : verify ? verify : "--synthetic";
  int status = 0;
  lsim_json_doc doc = LSIM_JSON_DOC_INIT;
  const cJSON *root = NULL;
  if (in || verify) {
    if (lsim_json_load(&doc, file, NULL, &lsim_bundle_json_codes, &eb))
      return lsim__fail_out(file, NULL, &eb, eb.code == LSIM_E_NOMEM ? 1 : 2);
    root = doc.root;
  }
  /* an --out that cannot be written (no such directory, a link, a device)
  ** is refused before the fit, as bad usage */
  if (out && lsim_out_check(out, &eb)) {
    status = lsim__fail_out(out, NULL, &eb, lsim_cli_status(eb.code));
    goto done;
  }
  if (verify) {
    lsim_bundle vb;
    memset(&vb, 0, sizeof vb);
    lsim_err rc = lsim_bundle_verify(root, &col, &vb, &eb);
    status = rc ? lsim__fail_out(file, &col, &eb,
                                 rc == LSIM_E_NOMEM ? 1 : 2)
                : 0;
    if (!rc) {
      char h[LSIM_DIGEST_HEX_SIZE];
      printf("bundle %s ok: %s, R %d, %d cluster(s), %d sources\n",
             lsim_digest_hex(&vb.bundle, h), lsim_jd_method_name(vb.method),
             vb.R, vb.k, vb.n);
    }
    lsim_bundle_release(&vb);
    goto done;
  }
  lsim_err rc = 0;
  if (in) {
    rc = lsim_bundle_coll_parse(&col, root, &eb);
  } else {
    rc = lsim_jd_synth_make(&syn, &col.syn, &eb);
    if (!rc) {
      col.n = col.syn.n;
      col.d_in = col.syn.d_in;
      col.d_out = col.syn.d_out;
      col.src = col.syn.src;
      snprintf(col.base, sizeof col.base, "synthetic-base");
      snprintf(col.module, sizeof col.module, "synthetic.proj");
      col.names = calloc((size_t)col.n, sizeof *col.names);
      for (int i = 0; col.names && i < col.n; i++) {
        char nm[32];
        snprintf(nm, sizeof nm, "syn%05d", i);
        col.names[i] = strdup(nm);
      }
    }
  }
  if (rc) {
    status = lsim__fail_out(file, &col, &eb, rc == LSIM_E_NOMEM ? 1 : 2);
    goto done;
  }
  if (report) {
    int ranks[32], ks[32], nr, nk;
    nr = ranks_s ? lsim__parse_list(ranks_s, ranks, 32) : 1;
    nk = ks_s ? lsim__parse_list(ks_s, ks, 32) : 1;
    if (!ranks_s)
      ranks[0] = cfg.rank;
    if (!ks_s)
      ks[0] = cfg.clusters;
    if (nr < 1 || nk < 1) {
      fprintf(stderr, "lorasim: error E_USAGE: --ranks and --clusters-list "
                      "take comma-separated positive integers\n");
      status = 2;
      goto done;
    }
    lsim__ktime *kt = NULL;
    int nkt = 0;
    if (ktimes && (rc = lsim__read_times(ktimes, &kt, &nkt, &eb))) {
      status = lsim__fail_out(ktimes, NULL, &eb, 2);
      goto done;
    }
    rc = lsim__report(&col, &cfg, ranks, nr, ks, nk, kt, nkt, &eb);
    free(kt);
    if (rc)
      status = lsim__fail_out(file, NULL, &eb, 1);
    goto done;
  }
  {
    lsim_jd_result r = LSIM_JD_RESULT_INIT;
    lsim_bundle_ids b = {0};
    char *txt = NULL;
    cJSON *o = NULL;
    b.src = calloc((size_t)col.n, sizeof *b.src);
    b.ranks = calloc((size_t)col.n, sizeof *b.ranks);
    b.scales = calloc((size_t)col.n, sizeof *b.scales);
    if (!b.src || !b.ranks || !b.scales)
      rc = lsim_fail(&eb, LSIM_E_NOMEM, "digests");
    for (int i = 0; !rc && i < col.n; i++) {
      b.ranks[i] = col.src[i].rank;
      b.scales[i] = col.src[i].scale;
    }
    for (int i = 0; !rc && i < col.n; i++)
      rc = lsim_jd_source_digest(&col.src[i], col.d_in, col.d_out, &b.src[i],
                                 &eb);
    if (!rc)
      rc = lsim_jd_fit(col.src, col.n, col.d_in, col.d_out, &cfg, &r, &eb);
    if (rc) {
      /* rank/cluster limits against this collection are bad usage */
      int input = rc == LSIM_E_CMP_RANK || rc == LSIM_E_CMP_CLUSTERS ||
                  rc == LSIM_E_CMP_ZERO_NORM || rc == LSIM_E_CMP_NONFINITE;
      status = lsim__fail_out(file, NULL, &eb, input ? 2 : 1);
    } else if ((rc = lsim_bundle_ids_derive(&col, &cfg, &r, &b, &eb))) {
      status = lsim__fail_out(file, NULL, &eb, 1);
    } else if (!(o = lsim__bundle_json(&col, &cfg, &r, &b)) ||
               !(txt = cJSON_PrintUnformatted(o))) {
      eb.code = LSIM_E_NOMEM;
      snprintf(eb.msg, sizeof eb.msg, "bundle text");
      status = lsim__fail_out(file, NULL, &eb, 1);
    } else if ((rc = lsim__write_atomic(out, txt, &eb))) {
      status = lsim__fail_out(out, NULL, &eb, lsim_cli_status(rc));
    } else {
      char h[LSIM_DIGEST_HEX_SIZE];
      printf("bundle %s\n", lsim_digest_hex(&b.id, h));
      printf("source set %s (%d adapters)\n", lsim_digest_hex(&b.set, h),
             col.n);
      printf("%s R %d clusters %d: rel_err %.6e (total err2 %.6e of %.6e), "
             "iterations %d, rounds %d, converged %s\n",
             lsim_jd_method_name(r.method), r.R, r.k,
             r.total_err2 / r.total_norm2, r.total_err2, r.total_norm2,
             r.iterations, r.rounds, r.converged ? "yes" : "no");
      int r0 = 0;
      for (int i = 0; i < col.n; i++)
        r0 = col.src[i].rank > r0 ? col.src[i].rank : r0;
      lsim_jd_ledger L;
      if (!lsim_jd_ledger_count(col.n, r0, col.d_in, col.d_out, r.R, r.k, &L,
                                NULL))
        printf("parameters: lora %lld, %s %lld\n", (long long)L.lora,
               lsim_jd_method_name(r.method),
               (long long)(r.method == LSIM_JD_FULL ? L.full_k : L.diag_k));
      printf("wrote %s\n", out);
    }
    free(txt);
    cJSON_Delete(o);
    lsim_bundle_ids_release(&b);
    lsim_jd_result_release(&r);
  }
done:
  lsim_json_release(&doc);
  lsim_bundle_coll_release(&col);
  return status;
}
