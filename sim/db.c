/*
** db.c: the SQLite event spine (contract in db.h, schema in docs/SCHEMA.md).
**
** A database holds exactly one run (run_id 1).  The connection moves through
** three states; each transition is made by the function named on the arrow:
**
**     OPEN --lsim_db_begin_run--> RUNNING --lsim_db_end_run--> ENDED
**
**   OPEN     schema applied and committed, runs is empty, no transaction.
**   RUNNING  the run row is committed with status 'running' and one batch
**            transaction is open (BEGIN IMMEDIATE).  Appends go into it;
**            after LSIM_DB_BATCH rows it is committed and a new one begun.
**   ENDED    everything committed, status written, no transaction.
**
** Invariants:
**
**   D1  In RUNNING, exactly one transaction is open unless `broken` is set
**       (SQLite may roll a transaction back on its own after an I/O or
**       out-of-memory error; from then on every append fails fast, so no row
**       is ever written in autocommit mode behind the batch's back).
**   D2  Events reach the table in the order they were appended: the pending
**       buffer below is flushed, in order, before any commit, before
**       lsim_db_handle hands the connection out, and before close.
**   D3  The status becomes 'ok' only in lsim_db_end_run, and only after the
**       last batch committed.  A failed write anywhere leaves 'running'.
**   D4  No column holds wall-clock time, so the same run writes the same
**       event rows, byte for byte.
**
** Speed.  The hot path is lsim_db_event.  Events are buffered
** LSIM__VT_ROWS at a time and written with one INSERT .. SELECT from the
** lsim_rows virtual table, which shows the buffer to SQLite: a value costs
** one sqlite3_result_int64 instead of a sqlite3_bind_int64 (about 5% of a
** 1 M-request replay's CPU against 64-row multi-row INSERTs,
** docs/BENCHMARKS.md).  Earlier, measured open..close on one core of an
** EPYC VM: about 0.9M events/s one row per statement, 1.3-1.4M/s with 64
** rows per statement; page sizes 4K..32K were within noise of each other,
** 64K was slower; synchronous OFF vs NORMAL within noise.  Iteration,
** starvation and request rows are buffered and written the same way (a
** request's outcome is a text column pointing into its buffered row);
** each buffer is written on its own when it fills.  Rows are stored
** narrow (docs/SCHEMA.md, "How the rows are stored"): SQLite's cost per
** row grows with its columns, so pairs of ints share a column and words
** (event details, iteration results, starvation words) are codes into the
** words table, assigned when first appended; the views events,
** iterations and starvation give back the version-1 columns.  Fewer rows
** mattered most: since schema 7 an iteration's own events are kept in its
** iteration_log row ("iteration-bound events" below), which took the
** bench shape from about 1.1 to about 1.5 M events per CPU-second.  `seq`
** is event_log's rowid (INTEGER PRIMARY KEY): appends in seq order go to
** the right edge of one B-tree, and no separate (run_id, seq) index is
** needed -- building that index at end of run cost more than half of the
** insert time again.  An event whose seq continues the table is inserted
** with a NULL seq (SQLite's next rowid is then the seq, without the
** B-tree search an explicit rowid costs).
**
** Errors.  lsim_db_open, lsim_db_begin_run and lsim_db_end_run report
** through the errbuf.  The append functions have no errbuf: they return
** LSIM_E_DB (or LSIM_E_BUG when called outside a run) and keep a complete
** message ("<path>: <what>: <sqlite message>") for lsim_db_errmsg.
*/
#include "db.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"
#include "runid.h"

/* PRAGMA user_version of the schema below; bump on any schema change. */
#define LSIM__SCHEMA_VERSION 7
#define LSIM__RUN_ID 1 /* the INSERTs below spell it as the literal 1 */
#define LSIM__VT_ROWS 1024  /* event, iteration, starvation rows per INSERT .. SELECT */
#define LSIM__PAGE_SIZE 8192
#define LSIM__DCACHE 64     /* word pointer cache slots (a power of 2) */
#define LSIM__MAX_WORDS 65535 /* codes fit 16 bits (starvation_log.codes) */
#define LSIM__CACHE_KIB 65536

enum { LSIM__OPEN = 0, LSIM__RUNNING = 1, LSIM__ENDED = 2 };

#define LSIM__NO_SEQ INT64_MIN /* max_seq of an empty event_log */
#define LSIM__WORD 24          /* longest buffered outcome / interval word + 1 */

/* A buffered request row as requests stores it: request, tenant,
** adapter, worker, arrival, first token and finish ticks, prompt and
** output tokens, loads waited, the outcome (a LSIM__TEXT_REF to the copy
** in this row, offset from the start of the buffer; LSIM_NONE: NULL),
** then the time breakdown (queue wait .. requested tokens).  The outcome
** is copied, since the caller's string only has to live for the call. */
#define LSIM__RQ_COLS 18
#define LSIM__RQ_OUTCOME 10
typedef struct lsim__req_row {
  int64_t v[LSIM__RQ_COLS];
  char outcome[LSIM__WORD];
} lsim__req_row;
_Static_assert(sizeof(lsim__req_row) % sizeof(int64_t) == 0,
               "request rows are read as int64_t strides");

/* A buffered loads row: load, kind (a LSIM__TEXT_REF to the copy in this
** row), worker, adapter, attempt, request, bytes, disk bytes, start and
** end ticks, model_ns, measured_ns. */
#define LSIM__LD_COLS 12
#define LSIM__LD_KIND 1
typedef struct lsim__ld_row {
  int64_t v[LSIM__LD_COLS];
  char kind[LSIM__WORD];
} lsim__ld_row;
_Static_assert(sizeof(lsim__ld_row) % sizeof(int64_t) == 0,
               "load rows are read as int64_t strides");

/* An iteration row as iteration_log stores it: iter, worker << 32 |
** result code, start and end ticks, prefill and decode rows,
** prefill_reqs << 32 | decode_reqs, distinct_adapters << 32 | segments,
** true and padded rank rows, backend_ns, model_ns, measured_ns,
** ctx_tokens, then the seqs of its iteration_selected and
** iteration_completed events and its debits (a reference into the text
** arena, LSIM__TEXT_REF); LSIM_NONE stored as NULL from backend_ns on. */
#define LSIM__IT_COLS 18
#define LSIM__IT_OPT 10    /* the first column that may be NULL */
#define LSIM__IT_SEL 14    /* sel_seq */
#define LSIM__IT_DONE 15   /* done_seq */
#define LSIM__IT_DEBITS 16 /* debits, a text column */
#define LSIM__IT_FINS 17   /* fins, a text column */
typedef struct lsim__it_row {
  int64_t v[LSIM__IT_COLS];
} lsim__it_row;

/* The debits of one iteration are a JSON object, at most LSIM__DEBITS_MAX
** bytes (a debit that would not fit is written as an event_log row
** instead): one member per debit, named by its request, whose value packs
** the rest into one integer, so that a reader's json_each needs no second
** parse (a JSON array per debit read about six times slower with SQLite
** 3.40: docs/BENCHMARKS.md):
**
**   detail code | (seq - done_seq) << 6 | tenant << 16 | adapter << 26 |
**   value << 46
**
** with an absent tenant or adapter stored as all ones.  A debit whose
** fields do not fit these widths is written as an event_log row.  The
** buffered rows' texts share an arena of LSIM__ARENA bytes (the buffer is
** written when it is full); a row refers to its text as offset << 24 |
** length. */
#define LSIM__DEBITS_MAX 65536
#define LSIM__ARENA (1 << 20)
#define LSIM__DEBIT_LEN 48 /* longest member: two integers and punctuation */
#define LSIM__DEBIT_CODE 63       /* 6 bits */
#define LSIM__DEBIT_OFF 1023      /* 10 bits, from bit 6 */
#define LSIM__DEBIT_TENANT 1023   /* 10 bits, from bit 16; all ones: none */
#define LSIM__DEBIT_ADAPTER 1048575 /* 20 bits, from bit 26; all ones: none */
#define LSIM__DEBIT_VALUE 131071  /* 17 bits, from bit 46 */
#define LSIM__TEXT_REF(off, len) ((int64_t)(off) << 24 | (int64_t)(len))
_Static_assert(LSIM__DEBITS_MAX < (1 << 24) &&
                   LSIM__ARENA >= 2 * LSIM__DEBITS_MAX,
               "a text reference holds any length; the arena holds any text");

/* A worker's iteration_selected event, kept back until its iteration's
** row is written (it then goes into that row) or a commit comes first
** (it then goes to event_log). */
typedef struct lsim__held {
  int64_t seq, tick, iter, value;
  int set;
} lsim__held;

/* A starvation interval as starvation_log stores it: worker << 32 |
** entity, start and end ticks, starved << 32 | closed_by code << 16 |
** kind code. */
#define LSIM__IV_COLS 4
typedef struct lsim__iv_row {
  int64_t v[LSIM__IV_COLS];
} lsim__iv_row;

/* An event as event_log stores it (docs/SCHEMA.md): v[0] tick,
** v[1] kind | detail code << 16, v[2] worker << 32 | tenant (each as 32
** bits), v[3] attempt << 32 | adapter (attempt is mostly 0, so the
** value is small), then request, generation, pages,
** bytes, value (LSIM_NONE stored as NULL).  Packed when appended. */
#define LSIM__EV_V 9
typedef struct lsim__ev_row {
  int64_t seq;
  int64_t v[LSIM__EV_V];
} lsim__ev_row;

/* The rows the `lsim_rows` virtual table shows while one INSERT .. SELECT
** runs: n rows of `stride` integers from v, column c being v[c] of each
** row; a column whose bit is set in `nulls` gives NULL for LSIM_NONE.
** A column whose bit is set in `tcols` is text: its integer is a
** LSIM__TEXT_REF into `text`. */
typedef struct lsim__src {
  const int64_t *v;
  int n, stride;
  uint32_t nulls, tcols;
  const char *text;
  const unsigned char *autoseq; /* NULL, or per row: column 0 is NULL */
} lsim__src;

struct lsim_db {
  sqlite3 *h;
  char *path;
  sqlite3_stmt *req;  /* one request row, its outcome too long to buffer */
  sqlite3_stmt *sum;
  sqlite3_stmt *val;
  sqlite3_stmt *lod;  /* INSERT INTO loads */
  sqlite3_stmt *ten;  /* INSERT OR REPLACE INTO tenants */
  sqlite3_stmt *adp;  /* INSERT OR REPLACE INTO adapters */
  int state;
  int broken;         /* an append or commit failed; see D1 */
  int npend;          /* buffered events, not yet in the table */
  int64_t batch_rows; /* rows appended since the last commit */
  int64_t events;     /* events accepted by lsim_db_event */
  int64_t max_seq;    /* largest seq in event_log; LSIM__NO_SEQ */
  lsim__ev_row pend[LSIM__VT_ROWS];
  struct {
    const char *p; /* a detail string seen before (static, see event.h) */
    int64_t code;
  } dcache[LSIM__DCACHE];
  int ndcache;        /* filled dcache slots */
  char **words;       /* the words table: words[c - 1] has code c */
  int nwords, capwords;
  sqlite3_stmt *det;  /* INSERT INTO words */
  int nitpend;        /* buffered iteration rows */
  lsim__it_row itpend[LSIM__VT_ROWS];
  int nrqpend;        /* buffered request rows */
  lsim__req_row rqpend[LSIM__VT_ROWS];
  int nldpend;        /* buffered loads rows */
  lsim__ld_row ldpend[LSIM__VT_ROWS];
  int nivpend;        /* buffered starvation intervals */
  lsim__iv_row ivpend[LSIM__VT_ROWS];
  lsim__src src;      /* the rows lsim_rows shows to the statement running */
  /* the iteration-bound events ("iteration-bound events" below) */
  lsim__held *held;   /* [nheld]: one per worker */
  int nheld, nheld_set;
  int open;           /* orow is the last iteration row, not yet buffered:
                         its completion events may still come */
  lsim__it_row orow;
  int64_t o_rows;     /* its prefill + decode rows */
  const char *o_result; /* its result (a static string, db.h) */
  int o_ok;           /* that result is "ok" */
  char *otext;        /* its debits so far, a JSON object without its '}' */
  size_t olen;
  char *ftext;        /* its fins so far, the same */
  size_t flen;
  struct {            /* the last debit put in otext (lsim__pack_done) */
    int set;
    int64_t seq, request, rest;
    int tenant, adapter;
  } last;
  lsim_event kv;      /* a kv_released held for its request_finished */
  int kv_set, kv_shift; /* kv.bytes == kv.pages << kv_shift */
  char *arena;        /* the debits of the buffered iteration rows */
  size_t alen;
  sqlite3_stmt *vev;  /* events from lsim_rows */
  unsigned char autoseq[LSIM__VT_ROWS]; /* per buffered event: seq NULL */
  sqlite3_stmt *vit;  /* iterations from lsim_rows */
  sqlite3_stmt *vrq;  /* requests from lsim_rows */
  sqlite3_stmt *vld;  /* loads from lsim_rows */
  sqlite3_stmt *viv;  /* starvation intervals from lsim_rows */
  char err[512];      /* message of the last failed append */
};

/* ---- the schema ----------------------------------------------------------- */

static const char lsim__schema[] =
    "CREATE TABLE runs("
    " run_id INTEGER PRIMARY KEY,"
    " scenario_name TEXT,"
    " scenario_path TEXT,"
    " scenario_sha256 TEXT,"
    " seed INTEGER,"
    " version TEXT,"
    " backend TEXT,"
    " scheduler TEXT,"
    " evict TEXT,"
    " prefetch TEXT,"
    " ns_per_tick INTEGER,"
    " workers INTEGER,"
    " command_line TEXT,"
    " status TEXT NOT NULL"
    "  CHECK(status IN ('running','ok','failed','interrupted')),"
    " error TEXT,"
    " events INTEGER,"
    " end_tick INTEGER,"
    /* version 6 (issue 19): what ran and which clock drove the time */
    " execute TEXT,"
    " clock TEXT);"
    /* the run's identity (sim/runid.h): every input file with its digest
    ** and every command-line option it was given; written with the run
    ** row, in the same transaction */
    "CREATE TABLE run_inputs("
    " run_id INTEGER NOT NULL,"
    " role TEXT NOT NULL,"
    " path TEXT NOT NULL,"
    " sha256 TEXT NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " PRIMARY KEY(run_id, role, path));"
    "CREATE TABLE run_options("
    " run_id INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " value TEXT NOT NULL,"
    " PRIMARY KEY(run_id, name));"
    "CREATE TABLE event_kinds("
    " kind INTEGER PRIMARY KEY,"
    " name TEXT UNIQUE NOT NULL);"
    /* the events as stored; readers use the `events` view below */
    "CREATE TABLE event_log("
    " seq INTEGER PRIMARY KEY,"
    " tick INTEGER,"
    " kind_detail,"
    " worker_tenant,"
    " attempt_adapter,"
    " request INTEGER,"
    " generation INTEGER,"
    " pages INTEGER,"
    " bytes INTEGER,"
    " value INTEGER);"
    "CREATE TABLE words("
    " code INTEGER PRIMARY KEY,"
    " word TEXT UNIQUE NOT NULL);"
    "CREATE TABLE requests("
    " run_id INTEGER NOT NULL,"
    " request INTEGER NOT NULL,"
    " tenant INTEGER,"
    " adapter INTEGER,"
    " worker INTEGER,"
    " arrival_tick INTEGER,"
    " first_token_tick INTEGER,"
    " finish_tick INTEGER,"
    " prompt_tokens INTEGER,"
    " output_tokens INTEGER,"
    " loads_waited INTEGER,"
    " outcome TEXT,"
    /* version 4 (issue 21): where the request's time went (event.h) */
    " queue_wait_ticks INTEGER,"
    " load_wait_ticks INTEGER,"
    " prefill_ticks INTEGER,"
    " decode_ticks INTEGER,"
    " preemptions INTEGER,"
    " cold INTEGER,"
    " requested_tokens INTEGER);"
    "CREATE TABLE iteration_log("
    " iter,"
    " worker_result,"
    " start_tick,"
    " end_tick,"
    " prefill_rows,"
    " decode_rows,"
    " reqs,"
    " adapters_segments,"
    " true_rank_rows,"
    " padded_rank_rows,"
    " backend_ns,"
    " model_ns,"
    " measured_ns,"
    " ctx_tokens,"
    /* version 7: the iteration's own events (see the events view) */
    " sel_seq,"
    " done_seq,"
    " debits,"
    " fins);"
    /* version 6: every copy the world timed, with both times */
    "CREATE TABLE loads("
    " run_id INTEGER NOT NULL,"
    " load INTEGER NOT NULL,"
    " kind TEXT NOT NULL,"
    " worker INTEGER,"
    " adapter INTEGER,"
    " attempt INTEGER,"
    " request INTEGER,"
    " bytes INTEGER,"
    " disk_bytes INTEGER,"
    " start_tick INTEGER,"
    " end_tick INTEGER,"
    " model_ns INTEGER NOT NULL,"
    " measured_ns INTEGER,"
    " PRIMARY KEY(run_id, load));"
    "CREATE TABLE validations("
    " run_id INTEGER NOT NULL,"
    " iter INTEGER NOT NULL,"
    " backend TEXT NOT NULL,"
    " reference TEXT NOT NULL,"
    " max_abs_err REAL,"
    " max_rel_err REAL,"
    " exact INTEGER NOT NULL);"
    "CREATE TABLE starvation_log("
    " worker_entity,"
    " start_tick,"
    " end_tick,"
    " codes);"
    "CREATE TABLE runs_summary("
    " run_id INTEGER NOT NULL,"
    " key TEXT NOT NULL,"
    " value REAL,"
    " PRIMARY KEY(run_id, key));"
    "CREATE VIEW events AS SELECT"
    " 1 AS run_id, e.seq AS seq, e.tick AS tick,"
    " e.kind_detail & 65535 AS kind,"
    " nullif(e.worker_tenant >> 32, -1) AS worker,"
    " e.request AS request,"
    " nullif((e.worker_tenant << 32) >> 32, -1) AS tenant,"
    " nullif((e.attempt_adapter << 32) >> 32, -1) AS adapter,"
    " e.generation AS generation,"
    " nullif(e.attempt_adapter >> 32, -1) AS attempt,"
    " e.pages AS pages, e.bytes AS bytes, e.value AS value,"
    " d.word AS detail"
    " FROM event_log AS e"
    " LEFT JOIN words AS d ON d.code = e.kind_detail >> 16"
    /* version 7: an iteration's iteration_selected, iteration_completed
    ** and completed_service_debited events, and the kv_released and
    ** request_finished of a request it finished, kept in its
    ** iteration_log row when the row says all they say ("iteration-bound
    ** events" below) */
    /* Every arm gives each column the affinity the first gives it (the
    ** CASTs to INTEGER, a CAST of NULL to TEXT), so that SQLite can flatten
    ** the view into a query: ORDER BY seq then merges the arms, reading
    ** event_log in rowid order, and a WHERE term is tested per arm.  Words
    ** come by a join, not a scalar subquery: an aggregate over the view
    ** computes every column of every arm, and the subquery cost about
    ** 0.5 us a row more. */
    " UNION ALL SELECT"
    " 1, CAST(i.sel_seq AS INTEGER), CAST(i.start_tick AS INTEGER), 6,"
    " nullif(i.worker_result >> 32, -1), CAST(NULL AS INTEGER), NULL, NULL,"
    " CAST(i.iter AS INTEGER), 0, CAST(0 AS INTEGER), CAST(0 AS INTEGER),"
    " CAST(i.prefill_rows + i.decode_rows AS INTEGER), CAST(NULL AS TEXT)"
    " FROM iteration_log AS i WHERE i.sel_seq IS NOT NULL"
    " UNION ALL SELECT"
    " 1, CAST(i.done_seq AS INTEGER), CAST(i.end_tick AS INTEGER), 7,"
    " nullif(i.worker_result >> 32, -1), CAST(NULL AS INTEGER), NULL, NULL,"
    " CAST(i.iter AS INTEGER), 0, CAST(0 AS INTEGER), CAST(0 AS INTEGER),"
    " CAST(CASE d.word WHEN 'ok' THEN i.prefill_rows + i.decode_rows"
    "  ELSE 0 END AS INTEGER),"
    " d.word"
    " FROM iteration_log AS i JOIN words AS d"
    "  ON d.code = i.worker_result & 4294967295"
    " WHERE i.done_seq IS NOT NULL"
    /* a debit: the member's name is the request, its value the rest
    ** (LSIM__DEBIT_*) */
#define LSIM__REST "j.atom"
    " UNION ALL SELECT"
    " 1, CAST(i.done_seq + ((" LSIM__REST " >> 6) & 1023) AS INTEGER),"
    " CAST(i.end_tick AS INTEGER), 8, nullif(i.worker_result >> 32, -1),"
    " CAST(j.key AS INTEGER), nullif((" LSIM__REST " >> 16) & 1023, 1023),"
    " nullif((" LSIM__REST " >> 26) & 1048575, 1048575),"
    " CAST(i.iter AS INTEGER), 0, CAST(0 AS INTEGER), CAST(0 AS INTEGER),"
    " CAST(" LSIM__REST " >> 46 AS INTEGER),"
    " d.word"
    " FROM iteration_log AS i, json_each(i.debits) AS j"
    " LEFT JOIN words AS d ON d.code = " LSIM__REST " & 63"
    /* a finished request's kv_released and request_finished: a member of
    ** fins, [rest, fin] (lsim__pack_finished) */
#define LSIM__FIN "(j.value ->> 1)"
    " UNION ALL SELECT"
    " 1, CAST(i.done_seq + (((j.value ->> 0) >> 6) & 1023) + 1 AS INTEGER),"
    " CAST(i.end_tick AS INTEGER), 16, nullif(i.worker_result >> 32, -1),"
    " CAST(j.key AS INTEGER), nullif(((j.value ->> 0) >> 16) & 1023, 1023),"
    " nullif(((j.value ->> 0) >> 26) & 1048575, 1048575),"
    " CAST((" LSIM__FIN " >> 16) & 65535 AS INTEGER), 0,"
    " CAST(" LSIM__FIN " & 65535 AS INTEGER),"
    " CAST((" LSIM__FIN " & 65535) << ((" LSIM__FIN " >> 48) & 31)"
    "  AS INTEGER),"
    " CAST(0 AS INTEGER), CAST(NULL AS TEXT)"
    " FROM iteration_log AS i, json_each(i.fins) AS j"
    " UNION ALL SELECT"
    " 1, CAST(i.done_seq + (((j.value ->> 0) >> 6) & 1023) + 2 AS INTEGER),"
    " CAST(i.end_tick AS INTEGER), 17, nullif(i.worker_result >> 32, -1),"
    " CAST(j.key AS INTEGER), nullif(((j.value ->> 0) >> 16) & 1023, 1023),"
    " nullif(((j.value ->> 0) >> 26) & 1048575, 1048575),"
    " CAST((" LSIM__FIN " >> 16) & 65535 AS INTEGER), 0,"
    " CAST(0 AS INTEGER), CAST(0 AS INTEGER),"
    " CAST((" LSIM__FIN " >> 32) & 65535 AS INTEGER),"
    " d.word"
    " FROM iteration_log AS i, json_each(i.fins) AS j"
    " LEFT JOIN words AS d ON d.code = " LSIM__FIN " >> 53;"
#undef LSIM__REST
#undef LSIM__FIN
    "CREATE VIEW iterations AS SELECT"
    " 1 AS run_id, i.iter AS iter,"
    " nullif(i.worker_result >> 32, -1) AS worker,"
    " i.start_tick AS start_tick, i.end_tick AS end_tick,"
    " i.prefill_rows AS prefill_rows, i.decode_rows AS decode_rows,"
    " i.reqs >> 32 AS prefill_reqs,"
    " (i.reqs << 32) >> 32 AS decode_reqs,"
    " i.adapters_segments >> 32 AS distinct_adapters,"
    " (i.adapters_segments << 32) >> 32 AS segments,"
    " i.true_rank_rows AS true_rank_rows,"
    " i.padded_rank_rows AS padded_rank_rows,"
    " i.backend_ns AS backend_ns,"
    " (SELECT w.word FROM words AS w"
    "  WHERE w.code = i.worker_result & 4294967295) AS result,"
    " i.model_ns AS model_ns, i.measured_ns AS measured_ns,"
    " i.ctx_tokens AS ctx_tokens"
    " FROM iteration_log AS i;"
    "CREATE VIEW starvation AS SELECT"
    " 1 AS run_id,"
    " (SELECT w.word FROM words AS w WHERE w.code = s.codes & 65535) AS kind,"
    " nullif(s.worker_entity >> 32, -1) AS worker,"
    " (s.worker_entity << 32) >> 32 AS entity,"
    " s.start_tick AS start_tick, s.end_tick AS end_tick,"
    " (SELECT w.word FROM words AS w"
    "  WHERE w.code = (s.codes >> 16) & 65535) AS closed_by,"
    " s.codes >> 32 AS starved"
    " FROM starvation_log AS s;"
    /* the catalog: what the integers of the other tables name (written
    ** when the run is set up, before its first event) */
    "CREATE TABLE tenants("
    " run_id INTEGER NOT NULL,"
    " tenant INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " weight INTEGER NOT NULL,"
    " traffic_weight INTEGER NOT NULL,"
    " PRIMARY KEY(run_id, tenant));"
    "CREATE TABLE adapters("
    " run_id INTEGER NOT NULL,"
    " adapter INTEGER NOT NULL,"
    " name TEXT NOT NULL,"
    " owner INTEGER NOT NULL,"
    " rank INTEGER NOT NULL,"
    " bytes INTEGER NOT NULL,"
    " pages INTEGER NOT NULL,"
    " targets TEXT NOT NULL,"
    " PRIMARY KEY(run_id, adapter));"
    "CREATE VIEW events_named AS SELECT"
    " e.run_id, e.seq, e.tick, e.kind, k.name AS kind_name, e.worker,"
    " e.request, e.tenant, e.adapter, e.generation, e.attempt, e.pages,"
    " e.bytes, e.value, e.detail, t.name AS tenant_name,"
    " a.name AS adapter_name"
    " FROM events AS e LEFT JOIN event_kinds AS k ON k.kind = e.kind"
    " LEFT JOIN tenants AS t ON t.run_id = e.run_id AND t.tenant = e.tenant"
    " LEFT JOIN adapters AS a ON a.run_id = e.run_id"
    "  AND a.adapter = e.adapter;"
    /* r.* : every column of requests, then the names */
    "CREATE VIEW requests_named AS SELECT"
    " r.*, t.name AS tenant_name, a.name AS adapter_name"
    " FROM requests AS r"
    " LEFT JOIN tenants AS t ON t.run_id = r.run_id AND t.tenant = r.tenant"
    " LEFT JOIN adapters AS a ON a.run_id = r.run_id"
    "  AND a.adapter = r.adapter;"
    /* a load interval's entity is an adapter (its owner is the tenant), a
    ** service interval's a tenant */
    "CREATE VIEW starvation_named AS SELECT"
    " s.run_id, s.kind, s.worker, s.entity,"
    " CASE s.kind WHEN 'load' THEN a.name ELSE t.name END AS entity_name,"
    " CASE s.kind WHEN 'load' THEN a.owner ELSE s.entity END AS tenant,"
    " t.name AS tenant_name,"
    " s.start_tick, s.end_tick, s.end_tick - s.start_tick AS ticks,"
    " s.closed_by, s.starved"
    " FROM starvation AS s"
    " LEFT JOIN adapters AS a ON s.kind = 'load' AND a.run_id = s.run_id"
    "  AND a.adapter = s.entity"
    " LEFT JOIN tenants AS t ON t.run_id = s.run_id"
    "  AND t.tenant = CASE s.kind WHEN 'load' THEN a.owner ELSE s.entity END;";

static const struct {
  int kind;
  const char *name;
} lsim__kinds[] = {
#define LSIM__KROW(sym, val, name) {val, name},
    LSIM_EVENT_KINDS(LSIM__KROW)
#undef LSIM__KROW
};

/* The request INSERT: its columns (the INSERT .. SELECT from lsim_rows),
** and the one-row form (run_id is the literal 1). */
#define LSIM__RQ_SQL_COLS_ONLY                                             \
  "INSERT INTO requests(run_id,request,tenant,adapter,worker,arrival_tick," \
  "first_token_tick,finish_tick,prompt_tokens,output_tokens,loads_waited," \
  "outcome,queue_wait_ticks,load_wait_ticks,prefill_ticks,decode_ticks,"   \
  "preemptions,cold,requested_tokens)"
#define LSIM__RQ_SQL_COLS LSIM__RQ_SQL_COLS_ONLY " VALUES"
#define LSIM__RQ_SQL_ROW "(1,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"

/* ---- helpers -------------------------------------------------------------- */

/* SQLite's reason for the last failure on h, for a message: its text,
** the result code by name and number (extended), and for an I/O-level
** failure the operating system's error ("database or disk is full
** (SQLITE_FULL, code 13; os: No space left on device)"). */
static const char *lsim__why(sqlite3 *h, char *out, size_t n) {
  static const struct {
    int code;
    const char *name;
  } names[] = {{SQLITE_FULL, "SQLITE_FULL"},       {SQLITE_IOERR, "SQLITE_IOERR"},
               {SQLITE_CANTOPEN, "SQLITE_CANTOPEN"}, {SQLITE_READONLY, "SQLITE_READONLY"},
               {SQLITE_BUSY, "SQLITE_BUSY"},       {SQLITE_LOCKED, "SQLITE_LOCKED"},
               {SQLITE_CORRUPT, "SQLITE_CORRUPT"}, {SQLITE_NOTADB, "SQLITE_NOTADB"},
               {SQLITE_NOMEM, "SQLITE_NOMEM"},     {SQLITE_PERM, "SQLITE_PERM"},
               {SQLITE_CONSTRAINT, "SQLITE_CONSTRAINT"}, {SQLITE_ERROR, "SQLITE_ERROR"}};
  if (!h) {
    snprintf(out, n, "out of memory");
    return out;
  }
  int ext = sqlite3_extended_errcode(h), prim = ext & 0xff;
  const char *name = "SQLITE error";
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (names[i].code == prim)
      name = names[i].name;
  int os = (prim == SQLITE_FULL || prim == SQLITE_IOERR ||
            prim == SQLITE_CANTOPEN)
               ? sqlite3_system_errno(h)
               : 0;
  snprintf(out, n, "%s (%s, code %d%s%s)", sqlite3_errmsg(h), name, ext,
           os ? "; os: " : "", os ? strerror(os) : "");
  return out;
}

/* Record an append failure for lsim_db_errmsg and mark the spine broken. */
static lsim_err lsim__append_fail(lsim_db *db, const char *what) {
  char why[256];
  snprintf(db->err, sizeof db->err, "%s: %s: %s", db->path, what,
           lsim__why(db->h, why, sizeof why));
  db->broken = 1;
  return LSIM_E_DB;
}

static lsim_err lsim__exec(lsim_db *db, const char *sql, const char *what,
                           lsim_errbuf *eb) {
  char why[256];
  if (sqlite3_exec(db->h, sql, NULL, NULL, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "%s: %s: %s", db->path, what,
                     lsim__why(db->h, why, sizeof why));
  return 0;
}

static lsim_err lsim__prepare(lsim_db *db, const char *sql,
                              sqlite3_stmt **st, lsim_errbuf *eb) {
  if (sqlite3_prepare_v3(db->h, sql, -1, SQLITE_PREPARE_PERSISTENT, st,
                         NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "%s: prepare: %s", db->path,
                     sqlite3_errmsg(db->h));
  return 0;
}

/* An id or quantity: LSIM_NONE becomes NULL. */
static void lsim__bind_opt(sqlite3_stmt *st, int i, int64_t v) {
  if (v == LSIM_NONE)
    sqlite3_bind_null(st, i);
  else
    sqlite3_bind_int64(st, i, v);
}

/* Text bound without a copy: every statement here is stepped before the
** binding function returns (or, for events, before the buffered event's
** static detail string could go away). */
static void lsim__bind_str(sqlite3_stmt *st, int i, const char *s) {
  if (s)
    sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
  else
    sqlite3_bind_null(st, i);
}

/* SQLite integers are signed: a seed >= 2^63 is stored as its two's
** complement (read it back as unsigned to recover it). */
static int64_t lsim__u64_as_i64(uint64_t v) {
  if (v <= (uint64_t)INT64_MAX)
    return (int64_t)v;
  return (int64_t)(v - (uint64_t)INT64_MAX - 1) + INT64_MIN;
}

/* Remove an old database file (or its -wal/-shm) before a fresh run.  Only
** a regular file is ever removed (sim/outfile.c refuses links, device
** nodes, FIFOs and directories: docs/RELIABILITY.md, "Output
** guarantees"); any regular file is replaced, as before. */
static lsim_err lsim__unlink(const char *base, const char *suffix,
                             lsim_errbuf *eb) {
  char p[4096];
  int n = snprintf(p, sizeof p, "%s%s", base, suffix);
  if (n < 0 || (size_t)n >= sizeof p)
    return lsim_fail(eb, LSIM_E_DB, "%s: path too long", base);
  lsim_err rc = lsim_out_check(p, eb);
  if (rc)
    return rc;
  if (unlink(p) != 0 && errno != ENOENT)
    return lsim_fail(eb, LSIM_E_DB, "%s: cannot remove old file: %s", p,
                     strerror(errno));
  return 0;
}

static lsim_err lsim__unlink_check(const char *base, const char *suffix,
                                   lsim_errbuf *eb) {
  char p[4096];
  snprintf(p, sizeof p, "%s%s", base, suffix);
  return lsim_out_check(p, eb);
}

static lsim_err lsim__step(lsim_db *db, sqlite3_stmt *st, const char *what) {
  int rc = sqlite3_step(st);
  sqlite3_reset(st);
  if (rc != SQLITE_DONE)
    return lsim__append_fail(db, what);
  return 0;
}

/* Bind request row q (its outcome copied in the row, or too long: then
** `outcome`) to the one-row INSERT. */
static void lsim__bind_request(sqlite3_stmt *st, const lsim__req_row *q,
                               const char *outcome) {
  static const uint32_t opt = 1u << 1 | 1u << 2 | 1u << 3 | 1u << 5 | 1u << 6;
  for (int c = 0; c < LSIM__RQ_COLS; c++) {
    if (c == LSIM__RQ_OUTCOME)
      lsim__bind_str(st, c + 1, outcome);
    else if (opt >> c & 1)
      lsim__bind_opt(st, c + 1, q->v[c]);
    else
      sqlite3_bind_int64(st, c + 1, q->v[c]);
  }
}

/* ---- lsim_rows: buffered rows as a virtual table ----------------------------
**
** Events, iterations, starvation intervals and requests reach their tables
** through `INSERT INTO t(...) SELECT c0, c1, ... FROM lsim_rows`, one
** statement per buffer of up to LSIM__VT_ROWS rows.  lsim_rows is an
** eponymous virtual table of this connection only (nothing of it is stored
** in the file): it shows db->src, the buffer being written, row by row in
** buffer order, so the rows reach the table in append order (D2) and the
** values stored are exactly those a bound INSERT would store (integers,
** NULL for LSIM_NONE where the column allows it, and the text of a text
** column).  SQLite reads each value with
** one sqlite3_result_int64 instead of a sqlite3_bind_int64 per parameter
** (which unbinds the old value and checks the statement first), and the
** statement's program is one loop instead of a 64-row VALUES list. */
#define LSIM__VT_COLS 18 /* the widest source row (requests) */
_Static_assert(LSIM__IT_COLS <= LSIM__VT_COLS &&
                   LSIM__EV_V + 1 <= LSIM__VT_COLS &&
                   LSIM__IV_COLS <= LSIM__VT_COLS &&
                   LSIM__RQ_COLS <= LSIM__VT_COLS,
               "lsim_rows declares a column for every source column");

typedef struct lsim__vt {
  sqlite3_vtab base;
  const lsim__src *src;
} lsim__vt;

typedef struct lsim__vt_cur {
  sqlite3_vtab_cursor base;
  int row;
} lsim__vt_cur;

static int lsim__vt_connect(sqlite3 *h, void *aux, int argc,
                            const char *const *argv, sqlite3_vtab **out,
                            char **err) {
  (void)argc, (void)argv, (void)err;
  int rc = sqlite3_declare_vtab(
      h, "CREATE TABLE x(c0,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,c13,c14,"
         "c15,c16,c17)");
  if (rc != SQLITE_OK)
    return rc;
  lsim__vt *vt = sqlite3_malloc(sizeof *vt);
  if (!vt)
    return SQLITE_NOMEM;
  memset(vt, 0, sizeof *vt);
  vt->src = aux;
  *out = &vt->base;
  return SQLITE_OK;
}

static int lsim__vt_disconnect(sqlite3_vtab *vt) {
  sqlite3_free(vt);
  return SQLITE_OK;
}

static int lsim__vt_best_index(sqlite3_vtab *vt, sqlite3_index_info *info) {
  (void)vt;
  info->estimatedCost = LSIM__VT_ROWS;
  info->estimatedRows = LSIM__VT_ROWS;
  return SQLITE_OK;
}

static int lsim__vt_open(sqlite3_vtab *vt, sqlite3_vtab_cursor **out) {
  (void)vt;
  lsim__vt_cur *c = sqlite3_malloc(sizeof *c);
  if (!c)
    return SQLITE_NOMEM;
  memset(c, 0, sizeof *c);
  *out = &c->base;
  return SQLITE_OK;
}

static int lsim__vt_close(sqlite3_vtab_cursor *c) {
  sqlite3_free(c);
  return SQLITE_OK;
}

static int lsim__vt_filter(sqlite3_vtab_cursor *c, int idx, const char *s,
                           int argc, sqlite3_value **argv) {
  (void)idx, (void)s, (void)argc, (void)argv;
  ((lsim__vt_cur *)c)->row = 0;
  return SQLITE_OK;
}

static int lsim__vt_next(sqlite3_vtab_cursor *c) {
  ((lsim__vt_cur *)c)->row++;
  return SQLITE_OK;
}

static int lsim__vt_eof(sqlite3_vtab_cursor *c) {
  const lsim__src *src = ((lsim__vt *)c->pVtab)->src;
  return ((lsim__vt_cur *)c)->row >= src->n;
}

static int lsim__vt_column(sqlite3_vtab_cursor *c, sqlite3_context *ctx,
                           int col) {
  const lsim__src *src = ((lsim__vt *)c->pVtab)->src;
  int row = ((lsim__vt_cur *)c)->row;
  int64_t v = src->v[(size_t)row * src->stride + col];
  if (col == 0 && src->autoseq && src->autoseq[row])
    sqlite3_result_null(ctx);
  else if (v == LSIM_NONE && (src->nulls >> col & 1))
    sqlite3_result_null(ctx);
  else if (src->tcols >> col & 1) /* the text outlives the statement's step */
    sqlite3_result_text(ctx, src->text + (v >> 24), (int)(v & 0xffffff),
                        SQLITE_STATIC);
  else
    sqlite3_result_int64(ctx, v);
  return SQLITE_OK;
}

static int lsim__vt_rowid(sqlite3_vtab_cursor *c, sqlite3_int64 *out) {
  *out = ((lsim__vt_cur *)c)->row;
  return SQLITE_OK;
}

static const sqlite3_module lsim__vt_module = {
    .iVersion = 0,
    .xCreate = NULL, /* eponymous only: no CREATE VIRTUAL TABLE, no schema */
    .xConnect = lsim__vt_connect,
    .xBestIndex = lsim__vt_best_index,
    .xDisconnect = lsim__vt_disconnect,
    .xDestroy = lsim__vt_disconnect,
    .xOpen = lsim__vt_open,
    .xClose = lsim__vt_close,
    .xFilter = lsim__vt_filter,
    .xNext = lsim__vt_next,
    .xEof = lsim__vt_eof,
    .xColumn = lsim__vt_column,
    .xRowid = lsim__vt_rowid,
};

/* Insert n rows of `stride` integers from v with st (an INSERT .. SELECT
** from lsim_rows); the columns in the bitmask nulls are NULL where
** LSIM_NONE; the columns in tcols are text in `text`. */
static lsim_err lsim__insert_src(lsim_db *db, sqlite3_stmt *st,
                                 const int64_t *v, int n, int stride,
                                 uint32_t nulls, uint32_t tcols,
                                 const char *text,
                                 const char *what) {
  if (n == 0)
    return 0;
  db->src = (lsim__src){.v = v, .n = n, .stride = stride, .nulls = nulls,
                        .tcols = tcols, .text = text};
  if (st == db->vev)
    db->src.autoseq = db->autoseq;
  lsim_err rc = lsim__step(db, st, what);
  db->src = (lsim__src){0};
  return rc;
}

/* Write the buffered events in one INSERT .. SELECT.  A row whose seq is
** one past the largest in the table gets a NULL seq: SQLite then assigns
** max(rowid) + 1, which is that seq, and its existence check finds the
** cursor already at the end; an explicit rowid costs a search of the
** B-tree (about 130 ns a row).  Rows after a gap (an event kept in its
** iteration's row, the first of a run) give their seq. */
static lsim_err lsim__flush_events(lsim_db *db) {
  int n = db->npend;
  const lsim__ev_row *p = db->pend;
  db->npend = 0;
  if (n == 0)
    return 0;
  int64_t max = db->max_seq;
  for (int i = 0; i < n; i++) {
    db->autoseq[i] = max != LSIM__NO_SEQ && max < INT64_MAX &&
                     p[i].seq == max + 1;
    if (max == LSIM__NO_SEQ || p[i].seq > max)
      max = p[i].seq;
  }
  _Static_assert(sizeof(lsim__ev_row) == (LSIM__EV_V + 1) * sizeof(int64_t),
                 "an event row is seq then v, unpadded");
  /* request .. value may be NULL (seq is, by autoseq) */
  lsim_err rc = lsim__insert_src(db, db->vev, &p[0].seq, n, LSIM__EV_V + 1,
                                 ~0u << 5 & 0x3ffu, 0, NULL,
                                 "insert events");
  if (!rc)
    db->max_seq = max;
  return rc;
}

static lsim_err lsim__flush_iters(lsim_db *db) {
  int n = db->nitpend;
  db->nitpend = 0;
  lsim_err rc = lsim__insert_src(
      db, db->vit, db->itpend[0].v, n, LSIM__IT_COLS,
      ~0u << LSIM__IT_OPT & ((1u << LSIM__IT_COLS) - 1),
      1u << LSIM__IT_DEBITS | 1u << LSIM__IT_FINS, db->arena,
      "insert iterations");
  db->alen = 0;
  return rc;
}

static lsim_err lsim__flush_requests(lsim_db *db) {
  int n = db->nrqpend;
  db->nrqpend = 0;
  /* tenant, adapter, worker, first token and finish tick may be NULL */
  return lsim__insert_src(db, db->vrq, db->rqpend[0].v, n,
                          sizeof db->rqpend[0] / sizeof(int64_t),
                          1u << 1 | 1u << 2 | 1u << 3 | 1u << 5 | 1u << 6 |
                              1u << LSIM__RQ_OUTCOME,
                          1u << LSIM__RQ_OUTCOME, (const char *)db->rqpend,
                          "insert requests");
}

static lsim_err lsim__flush_loads(lsim_db *db) {
  int n = db->nldpend;
  db->nldpend = 0;
  /* worker, adapter, attempt, request and measured_ns may be NULL */
  return lsim__insert_src(db, db->vld, db->ldpend[0].v, n,
                          sizeof db->ldpend[0] / sizeof(int64_t),
                          1u << 2 | 1u << 3 | 1u << 4 | 1u << 5 | 1u << 11 |
                              1u << LSIM__LD_KIND,
                          1u << LSIM__LD_KIND, (const char *)db->ldpend,
                          "insert loads");
}

static lsim_err lsim__flush_intervals(lsim_db *db) {
  int n = db->nivpend;
  db->nivpend = 0;
  return lsim__insert_src(db, db->viv, db->ivpend[0].v, n, LSIM__IV_COLS,
                          0, 0, NULL, "insert starvation intervals");
}

/* Two ints in one column: hi in the upper 32 bits, lo in the lower, each
** as 32-bit two's complement; the events view takes them apart with
** arithmetic shifts (LSIM_NONE, -1, comes back as NULL). */
static int64_t lsim__pair(int hi, int lo) {
  return (int64_t)((uint64_t)(uint32_t)hi << 32 | (uint32_t)lo);
}

static lsim_err lsim__log_event(lsim_db *db, const lsim_event *ev);

/* Append one stored event row to the buffer; a full buffer is written. */
static lsim_err lsim__push_event(lsim_db *db, const lsim__ev_row *r) {
  db->pend[db->npend++] = *r;
  return db->npend == LSIM__VT_ROWS ? lsim__flush_events(db) : 0;
}

/* Worker w's held iteration_selected goes to event_log after all, as
** lsim_db_event would have stored it (lsim__hold_selected only holds an
** event whose other fields are these). */
static lsim_err lsim__spill(lsim_db *db, int w) {
  lsim__held *h = &db->held[w];
  h->set = 0;
  db->nheld_set--;
  lsim__ev_row r = {h->seq,
                    {h->tick, LSIM_EV_ITERATION_SELECTED,
                     lsim__pair(w, LSIM_NONE), lsim__pair(0, LSIM_NONE),
                     LSIM_NONE, h->iter, 0, 0, h->value}};
  return lsim__push_event(db, &r);
}

/* The open iteration row is complete: into the iteration buffer, with
** its debits' text (closed) copied into the arena. */
static lsim_err lsim__close_open(lsim_db *db) {
  lsim_err rc;
  if (db->kv_set) { /* its request_finished did not come in time */
    db->kv_set = 0;
    if ((rc = lsim__log_event(db, &db->kv)))
      return rc;
  }
  if (!db->open)
    return 0;
  db->open = 0;
  db->last.set = 0;
  int64_t *v = db->orow.v;
  if (db->alen + db->olen + db->flen + 2 > LSIM__ARENA &&
      (rc = lsim__flush_iters(db)))
    return rc;
  char *text[2] = {db->otext, db->ftext};
  size_t *len[2] = {&db->olen, &db->flen};
  for (int k = 0; k < 2; k++) {
    v[k ? LSIM__IT_FINS : LSIM__IT_DEBITS] = LSIM_NONE;
    if (*len[k] == 0)
      continue;
    text[k][(*len[k])++] = '}';
    memcpy(db->arena + db->alen, text[k], *len[k]);
    v[k ? LSIM__IT_FINS : LSIM__IT_DEBITS] =
        LSIM__TEXT_REF(db->alen, *len[k]);
    db->alen += *len[k];
    *len[k] = 0;
  }
  db->itpend[db->nitpend++] = db->orow;
  return db->nitpend == LSIM__VT_ROWS ? lsim__flush_iters(db) : 0;
}

/* Before a commit, a report query or close: the open iteration row is
** buffered, and every held iteration_selected goes to event_log, so that
** what is committed holds every event appended so far (a crash keeps a
** prefix of the log, as without packing). */
static lsim_err lsim__settle(lsim_db *db) {
  lsim_err rc = lsim__close_open(db);
  for (int w = 0; !rc && db->nheld_set > 0 && w < db->nheld; w++)
    if (db->held[w].set)
      rc = lsim__spill(db, w);
  return rc;
}

/* Write every buffered row: events, iterations, requests, starvation
** intervals.  Each table keeps its own append order (D2); the tables are
** independent, so the order between them does not matter.  A full buffer
** is written on its own as soon as it fills; this writes the partial ones
** (before a commit, a report query, or close).  Buffers are emptied even
** on failure (the spine is broken from then on). */
static lsim_err lsim__flush(lsim_db *db) {
  lsim_err rc = lsim__settle(db);
  if (!rc)
    rc = lsim__flush_events(db);
  if (rc) {
    db->npend = 0;
    db->nitpend = db->nrqpend = db->nldpend = db->nivpend = 0;
    return rc;
  }
  if ((rc = lsim__flush_iters(db))) {
    db->nrqpend = db->nldpend = db->nivpend = 0;
    return rc;
  }
  if ((rc = lsim__flush_requests(db))) {
    db->nldpend = db->nivpend = 0;
    return rc;
  }
  if ((rc = lsim__flush_loads(db))) {
    db->nivpend = 0;
    return rc;
  }
  return lsim__flush_intervals(db);
}

static int lsim__pending(const lsim_db *db) {
  return db->npend + db->nitpend + db->nrqpend + db->nldpend + db->nivpend +
         db->open +
         db->nheld_set + db->kv_set;
}

static lsim_err lsim__commit_batch(lsim_db *db) {
  lsim_err rc = lsim__flush(db);
  if (rc)
    return rc;
  if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK)
    return lsim__append_fail(db, "commit");
  if (sqlite3_exec(db->h, "BEGIN IMMEDIATE", NULL, NULL, NULL) != SQLITE_OK)
    return lsim__append_fail(db, "begin");
  db->batch_rows = 0;
  return 0;
}

/* Every append starts here: refuse outside a run or on a broken spine. */
static lsim_err lsim__append_ok(lsim_db *db, const char *fn) {
  if (db->broken)
    return LSIM_E_DB; /* db->err still holds the first failure */
  if (db->state != LSIM__RUNNING) {
    snprintf(db->err, sizeof db->err, "bug: %s outside a run (%s)", fn,
             db->path);
    return LSIM_E_BUG;
  }
  return 0;
}

/* Count one appended row; commit the batch when it is full. */
static lsim_err lsim__count_row(lsim_db *db) {
  if (++db->batch_rows >= LSIM_DB_BATCH)
    return lsim__commit_batch(db);
  return 0;
}

/* ---- open and close --------------------------------------------------------- */

static lsim_err lsim__setup(lsim_db *db, lsim_errbuf *eb) {
  lsim_err rc;
  char sql[128];

  /* a reader that looks in while the file is new (a test, a monitor) may
  ** hold its lock for a moment: wait for it rather than fail, from the
  ** first statement on (switching to WAL needs the lock too) */
  sqlite3_busy_timeout(db->h, 10000);
  /* page_size must come before the first table, and before WAL. */
  snprintf(sql, sizeof sql, "PRAGMA page_size=%d", LSIM__PAGE_SIZE);
  if ((rc = lsim__exec(db, sql, "set page size", eb)))
    return rc;
  sqlite3_stmt *st = NULL;
  if ((rc = lsim__prepare(db, "PRAGMA journal_mode=WAL", &st, eb)))
    return rc;
  int step = sqlite3_step(st);
  int wal = step == SQLITE_ROW &&
            sqlite3_column_text(st, 0) != NULL &&
            strcmp((const char *)sqlite3_column_text(st, 0), "wal") == 0;
  sqlite3_finalize(st);
  if (!wal)
    return lsim_fail(eb, LSIM_E_DB, "%s: cannot enable wal mode: %s",
                     db->path, sqlite3_errmsg(db->h));
  snprintf(sql, sizeof sql,
           "PRAGMA synchronous=OFF;"
           "PRAGMA temp_store=MEMORY;"
           "PRAGMA cache_size=-%d;",
           LSIM__CACHE_KIB);
  if ((rc = lsim__exec(db, sql, "set pragmas", eb)))
    return rc;

  if ((rc = lsim__exec(db, "BEGIN", "create schema", eb)))
    return rc;
  if ((rc = lsim__exec(db, lsim__schema, "create schema", eb)))
    return rc;
  if ((rc = lsim__prepare(db, "INSERT INTO event_kinds(kind, name) "
                              "VALUES(?1, ?2)", &st, eb)))
    return rc;
  for (size_t i = 0; i < sizeof lsim__kinds / sizeof lsim__kinds[0]; i++) {
    sqlite3_bind_int(st, 1, lsim__kinds[i].kind);
    sqlite3_bind_text(st, 2, lsim__kinds[i].name, -1, SQLITE_STATIC);
    if (sqlite3_step(st) != SQLITE_DONE) {
      rc = lsim_fail(eb, LSIM_E_DB, "%s: fill event_kinds: %s", db->path,
                     sqlite3_errmsg(db->h));
      sqlite3_finalize(st);
      return rc;
    }
    sqlite3_reset(st);
  }
  sqlite3_finalize(st);
  snprintf(sql, sizeof sql, "PRAGMA user_version=%d", LSIM__SCHEMA_VERSION);
  if ((rc = lsim__exec(db, sql, "set schema version", eb)))
    return rc;
  if ((rc = lsim__exec(db, "COMMIT", "create schema", eb)))
    return rc;

  /* The statements, prepared once. */
  if (sqlite3_create_module_v2(db->h, "lsim_rows", &lsim__vt_module,
                               &db->src, NULL) != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "%s: register lsim_rows: %s", db->path,
                     sqlite3_errmsg(db->h));
  if ((rc = lsim__prepare(db,
                          "INSERT INTO event_log(seq,tick,kind_detail,"
                          "worker_tenant,attempt_adapter,request,generation,"
                          "pages,bytes,value) SELECT c0,c1,c2,c3,c4,c5,c6,"
                          "c7,c8,c9 FROM lsim_rows",
                          &db->vev, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO iteration_log(iter,worker_result,"
                          "start_tick,end_tick,prefill_rows,decode_rows,reqs,"
                          "adapters_segments,true_rank_rows,padded_rank_rows,"
                          "backend_ns,model_ns,measured_ns,ctx_tokens,"
                          "sel_seq,done_seq,debits,fins) "
                          "SELECT c0,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11,c12,"
                          "c13,c14,c15,c16,c17 FROM lsim_rows",
                          &db->vit, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO starvation_log(worker_entity,"
                          "start_tick,end_tick,codes) SELECT c0,c1,c2,c3 "
                          "FROM lsim_rows",
                          &db->viv, eb)))
    return rc;
  if ((rc = lsim__prepare(db, LSIM__RQ_SQL_COLS LSIM__RQ_SQL_ROW, &db->req,
                          eb)) ||
      (rc = lsim__prepare(db,
                          LSIM__RQ_SQL_COLS_ONLY " SELECT 1,c0,c1,c2,c3,c4,c5,"
                          "c6,c7,c8,c9,c10,c11,c12,c13,c14,c15,c16,c17 "
                          "FROM lsim_rows",
                          &db->vrq, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO validations(run_id,iter,backend,"
                          "reference,max_abs_err,max_rel_err,exact) "
                          "VALUES(1,?,?,?,?,?,?)",
                          &db->val, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO loads(run_id,load,kind,worker,adapter,"
                          "attempt,request,bytes,disk_bytes,start_tick,"
                          "end_tick,model_ns,measured_ns) "
                          "VALUES(1,?,?,?,?,?,?,?,?,?,?,?,?)",
                          &db->lod, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO loads(run_id,load,kind,worker,adapter,"
                          "attempt,request,bytes,disk_bytes,start_tick,"
                          "end_tick,model_ns,measured_ns) "
                          "SELECT 1,c0,c1,c2,c3,c4,c5,c6,c7,c8,c9,c10,c11 "
                          "FROM lsim_rows",
                          &db->vld, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO words(code,word) VALUES(?,?)",
                          &db->det, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT OR REPLACE INTO runs_summary(run_id,key,"
                          "value) VALUES(1,?,?)",
                          &db->sum, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT OR REPLACE INTO tenants(run_id,tenant,name,"
                          "weight,traffic_weight) VALUES(1,?,?,?,?)",
                          &db->ten, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT OR REPLACE INTO adapters(run_id,adapter,"
                          "name,owner,rank,bytes,pages,targets) "
                          "VALUES(1,?,?,?,?,?,?,?)",
                          &db->adp, eb)))
    return rc;
  return 0;
}

lsim_err lsim_db_open(lsim_db **out, const char *path, lsim_errbuf *eb) {
  *out = NULL;
  if (!path || !*path)
    return lsim_fail(eb, LSIM_E_DB, "empty database path");
  lsim_err rc;
  /* every file is checked before any is removed */
  if ((rc = lsim_out_check(path, eb)) ||
      (rc = lsim__unlink_check(path, "-wal", eb)) ||
      (rc = lsim__unlink_check(path, "-shm", eb)) ||
      (rc = lsim__unlink(path, "", eb)) ||
      (rc = lsim__unlink(path, "-wal", eb)) ||
      (rc = lsim__unlink(path, "-shm", eb)))
    return rc;
  /* created here, not by SQLite: O_EXCL|O_NOFOLLOW closes the window in
  ** which a link could appear between the checks and the open */
  int cfd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                 0644);
  if (cfd < 0)
    return lsim_fail(eb, LSIM_E_DB, "%s: cannot create database: %s", path,
                     strerror(errno));
  close(cfd);

  lsim_db *db = calloc(1, sizeof *db);
  if (!db)
    return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory", path);
  db->max_seq = LSIM__NO_SEQ;
  size_t n = strlen(path) + 1;
  db->path = malloc(n);
  db->otext = malloc(LSIM__DEBITS_MAX);
  db->ftext = malloc(LSIM__DEBITS_MAX);
  db->arena = malloc(LSIM__ARENA);
  if (!db->path || !db->otext || !db->ftext || !db->arena) {
    free(db->path);
    free(db->otext);
    free(db->ftext);
    free(db->arena);
    free(db);
    return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory", path);
  }
  memcpy(db->path, path, n);

  /* NOMUTEX: one connection, one thread; saves a mutex per bind call. */
  int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
  if (sqlite3_open_v2(path, &db->h, flags, NULL) != SQLITE_OK) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: cannot open database: %s", path,
                   db->h ? sqlite3_errmsg(db->h) : "out of memory");
    lsim_db_close(db);
    return rc;
  }
  if ((rc = lsim__setup(db, eb))) {
    lsim_db_close(db);
    return rc;
  }
  *out = db;
  return 0;
}

void lsim_db_close(lsim_db *db) {
  if (!db)
    return;
  if (db->h) {
    /* A run that was never ended: keep what it wrote (status untouched, so
    ** it stays 'running').  On a broken spine the buffer is dropped, but a
    ** still-open transaction is committed: its rows were written.  Outside
    ** a run the only open transaction is a schema that failed half way. */
    if (db->state == LSIM__RUNNING && !db->broken)
      (void)lsim__flush(db);
    if (!sqlite3_get_autocommit(db->h) &&
        (db->state != LSIM__RUNNING ||
         sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK))
      sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    sqlite3_finalize(db->req);
    sqlite3_finalize(db->vrq);
    sqlite3_finalize(db->vld);
    sqlite3_finalize(db->sum);
    sqlite3_finalize(db->ten);
    sqlite3_finalize(db->adp);
    sqlite3_finalize(db->val);
    sqlite3_finalize(db->lod);
    sqlite3_finalize(db->det);
    sqlite3_finalize(db->vev);
    sqlite3_finalize(db->vit);
    sqlite3_finalize(db->viv);
    sqlite3_close_v2(db->h);
  }
  for (int i = 0; i < db->nwords; i++)
    free(db->words[i]);
  free(db->words);
  free(db->held);
  free(db->otext);
  free(db->ftext);
  free(db->arena);
  free(db->path);
  free(db);
}

/* ---- the run ------------------------------------------------------------------ */

/* The rows of run_inputs and run_options (docs/SCHEMA.md), inside the
** transaction of the run row. */
static lsim_err lsim__insert_ident(lsim_db *db, const lsim_runid *id,
                                   lsim_errbuf *eb) {
  if (!id)
    return 0;
  sqlite3_stmt *in = NULL, *op = NULL;
  lsim_err rc;
  if ((rc = lsim__prepare(db,
                          "INSERT INTO run_inputs(run_id,role,path,sha256,"
                          "bytes) VALUES(1,?1,?2,?3,?4)",
                          &in, eb)) ||
      (rc = lsim__prepare(db,
                          "INSERT INTO run_options(run_id,name,value) "
                          "VALUES(1,?1,?2)",
                          &op, eb))) {
    sqlite3_finalize(in);
    return rc;
  }
  for (int i = 0; !rc && i < id->ninputs; i++) {
    lsim__bind_str(in, 1, id->in[i].role);
    lsim__bind_str(in, 2, id->in[i].path);
    lsim__bind_str(in, 3, id->in[i].sha256);
    sqlite3_bind_int64(in, 4, id->in[i].bytes);
    if (sqlite3_step(in) != SQLITE_DONE)
      rc = lsim_fail(eb, LSIM_E_DB, "%s: insert run input %s: %s", db->path,
                     id->in[i].path, sqlite3_errmsg(db->h));
    sqlite3_reset(in);
  }
  for (int i = 0; !rc && i < id->nopts; i++) {
    lsim__bind_str(op, 1, id->opt[i].name);
    lsim__bind_str(op, 2, id->opt[i].value);
    if (sqlite3_step(op) != SQLITE_DONE)
      rc = lsim_fail(eb, LSIM_E_DB, "%s: insert run option %s: %s", db->path,
                     id->opt[i].name, sqlite3_errmsg(db->h));
    sqlite3_reset(op);
  }
  sqlite3_finalize(in);
  sqlite3_finalize(op);
  return rc;
}

lsim_err lsim_db_begin_run(lsim_db *db, const lsim_run_info *info,
                           lsim_errbuf *eb) {
  return lsim_db_begin_identified(db, info, NULL, eb);
}

lsim_err lsim_db_begin_identified(lsim_db *db, const lsim_run_info *info,
                                  const lsim_runid *ident, lsim_errbuf *eb) {
  if (!db || !info)
    return LSIM_BUG(eb, "lsim_db_begin_run without a database or run info");
  if (db->state != LSIM__OPEN)
    return LSIM_BUG(eb, "lsim_db_begin_run called twice");
  /* one held iteration_selected per worker (lsim__hold_selected); a
  ** worker past info->workers, or none, only means nothing is held */
  if (info->workers > 0 &&
      !(db->held = calloc((size_t)info->workers, sizeof *db->held)))
    return lsim_fail(eb, LSIM_E_NOMEM, "%s: out of memory", db->path);
  db->nheld = db->held ? info->workers : 0;
  sqlite3_stmt *st = NULL;
  lsim_err rc = lsim__prepare(
      db,
      "INSERT INTO runs(run_id,scenario_name,scenario_path,scenario_sha256,"
      "seed,version,backend,scheduler,evict,prefetch,ns_per_tick,workers,"
      "command_line,status,execute,clock) "
      "VALUES(?1,?2,?3,?4,?5,?6,?7,?8,?9,?10,?11,?12,?13,'running',?14,?15)",
      &st, eb);
  if (rc)
    return rc;
  /* one transaction: a run row is never without its identity rows */
  if ((rc = lsim__exec(db, "BEGIN IMMEDIATE", "begin", eb))) {
    sqlite3_finalize(st);
    return rc;
  }
  sqlite3_bind_int(st, 1, LSIM__RUN_ID);
  lsim__bind_str(st, 2, info->scenario_name);
  lsim__bind_str(st, 3, info->scenario_path);
  lsim__bind_str(st, 4, info->scenario_sha256);
  sqlite3_bind_int64(st, 5, lsim__u64_as_i64(info->seed));
  lsim__bind_str(st, 6, LSIM_VERSION);
  lsim__bind_str(st, 7, info->backend);
  lsim__bind_str(st, 8, info->scheduler);
  lsim__bind_str(st, 9, info->evict);
  lsim__bind_str(st, 10, info->prefetch);
  sqlite3_bind_int64(st, 11, info->ns_per_tick);
  sqlite3_bind_int(st, 12, info->workers);
  lsim__bind_str(st, 13, info->command_line);
  lsim__bind_str(st, 14, info->execute ? info->execute : "adapters");
  lsim__bind_str(st, 15, info->clock ? info->clock : "model");
  if (sqlite3_step(st) != SQLITE_DONE) {
    rc = lsim_fail(eb, LSIM_E_DB, "%s: insert run: %s", db->path,
                   sqlite3_errmsg(db->h));
    sqlite3_finalize(st);
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  sqlite3_finalize(st);
  if ((rc = lsim__insert_ident(db, ident, eb))) {
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  /* committed: the 'running' row is durable before any event exists */
  if ((rc = lsim__exec(db, "COMMIT", "insert run", eb))) {
    sqlite3_exec(db->h, "ROLLBACK", NULL, NULL, NULL);
    return rc;
  }
  if ((rc = lsim__exec(db, "BEGIN IMMEDIATE", "begin", eb)))
    return rc;
  db->state = LSIM__RUNNING;
  db->batch_rows = 0;
  return 0;
}

/* The code of word w in the words table, from 1, assigned in order of
** first use and inserted in the open batch (so it commits with, or
** before, the first row that names it).  Looked up by content: w need
** not outlive the call. */
static lsim_err lsim__word_code(lsim_db *db, const char *w, int64_t *code) {
  for (int i = 0; i < db->nwords; i++)
    if (strcmp(db->words[i], w) == 0) {
      *code = i + 1;
      return 0;
    }
  if (db->nwords >= LSIM__MAX_WORDS) {
    snprintf(db->err, sizeof db->err,
             "bug: more than %d distinct words in one run (%s)",
             LSIM__MAX_WORDS, db->path);
    return LSIM_E_BUG;
  }
  if (db->nwords == db->capwords) {
    int cap = db->capwords ? 2 * db->capwords : 32;
    char **nw = realloc(db->words, (size_t)cap * sizeof *nw);
    if (!nw)
      goto nomem;
    db->words = nw;
    db->capwords = cap;
  }
  size_t n = strlen(w) + 1;
  char *copy = malloc(n);
  if (!copy)
    goto nomem;
  memcpy(copy, w, n);
  db->words[db->nwords++] = copy;
  sqlite3_bind_int(db->det, 1, db->nwords);
  sqlite3_bind_text(db->det, 2, copy, -1, SQLITE_STATIC);
  *code = db->nwords;
  return lsim__step(db, db->det, "insert word");
nomem:
  snprintf(db->err, sizeof db->err, "%s: out of memory", db->path);
  db->broken = 1;
  return LSIM_E_NOMEM;
}

/* lsim__word_code through a small cache keyed by the string's address.
** A static string (an event detail, an iteration result: event.h, db.h)
** is found there without comparing text; a caller's buffer (starvation
** words) is checked against the cached word, since the same buffer may
** hold another word next time. */
static lsim_err lsim__cached_code(lsim_db *db, const char *w, int is_static,
                                  int64_t *code) {
  unsigned h = (unsigned)(((uintptr_t)w >> 3) * 2654435761u) &
               (LSIM__DCACHE - 1);
  unsigned i = h;
  for (;; i = (i + 1) & (LSIM__DCACHE - 1)) {
    if (db->dcache[i].p == w) {
      *code = db->dcache[i].code;
      if (is_static || strcmp(db->words[*code - 1], w) == 0)
        return 0;
      break; /* the buffer holds another word now: look it up again */
    }
    if (!db->dcache[i].p)
      break;
  }
  lsim_err rc = lsim__word_code(db, w, code);
  if (rc)
    return rc;
  if (db->dcache[i].p != w) {
    /* a new address; a full cache starts over (the words stay) */
    if (db->ndcache >= LSIM__DCACHE / 2) {
      memset(db->dcache, 0, sizeof db->dcache);
      db->ndcache = 0;
    }
    for (i = h; db->dcache[i].p; i = (i + 1) & (LSIM__DCACHE - 1))
      ;
    db->dcache[i].p = w;
    db->ndcache++;
  }
  db->dcache[i].code = *code;
  return 0;
}

/* ---- iteration-bound events ----------------------------------------------
**
** Two events of every iteration and one per request it served say nothing
** its iteration_log row does not, beyond their seq: iteration_selected
** (tick = start_tick, value = prefill + decode rows), iteration_completed
** (tick = end_tick, value = those rows or 0 when failed, detail =
** result) and completed_service_debited (tick = end_tick; request,
** tenant, adapter, value and detail vary), and a request the iteration
** finished adds its kv_released and request_finished.  They go into the
** row: sel_seq, done_seq, and debits, a JSON object with one member per
** debit (LSIM__DEBIT_*, lsim__pack_finished); the events view gives them
** back.  An event goes there only when the view gives back exactly what
** it was (every field is compared below); any other goes to event_log as
** before.  Fewer SQLite rows per event is what the writer's speed needed
** (docs/BENCHMARKS.md).
**
** The row of an iteration is appended just before its iteration_completed
** (sim/replay.c), its debits follow within the same engine call, and its
** iteration_selected came at launch: that one is held per worker until
** the row comes.  lsim__settle, before every commit, buffers the open row
** and sends the held events to event_log (D2 then holds for what is
** committed: every event up to some seq). */

/* ev, an iteration_selected, held for its iteration's row. */
static lsim_err lsim__hold_selected(lsim_db *db, const lsim_event *ev,
                                    int *packed) {
  int w = ev->worker;
  if (w < 0 || w >= db->nheld || ev->request != LSIM_NONE ||
      ev->tenant != LSIM_NONE || ev->adapter != LSIM_NONE ||
      ev->attempt != 0 || ev->pages != 0 || ev->bytes != 0 ||
      ev->value < 0 || ev->generation < 0 || ev->detail)
    return 0;
  lsim_err rc;
  if (db->held[w].set && (rc = lsim__spill(db, w)))
    return rc;
  db->held[w] = (lsim__held){ev->seq, ev->tick, ev->generation, ev->value, 1};
  db->nheld_set++;
  *packed = 1;
  return 0;
}

/* v in decimal at p; returns the end.  Two digits per division (the
** debits' integers are a visible part of the writer's time). */
static char *lsim__decimal(char *p, int64_t v) {
  static const char d2[] = "00010203040506070809101112131415161718192021222324"
                           "25262728293031323334353637383940414243444546474849"
                           "50515253545556575859606162636465666768697071727374"
                           "75767778798081828384858687888990919293949596979899";
  if (v < 0)
    *p++ = '-';
  uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
  char tmp[24], *t = tmp + sizeof tmp;
  while (u >= 100) {
    unsigned r = (unsigned)(u % 100);
    u /= 100;
    *--t = d2[2 * r + 1];
    *--t = d2[2 * r];
  }
  if (u >= 10) {
    *--t = d2[2 * u + 1];
    *--t = d2[2 * u];
  } else {
    *--t = (char)('0' + u);
  }
  while (t < tmp + sizeof tmp)
    *p++ = *t++;
  return p;
}

/* ev, an iteration_completed or completed_service_debited, into the open
** row when it is that row's (its worker, iteration and tick). */
static lsim_err lsim__pack_done(lsim_db *db, const lsim_event *ev,
                                int *packed) {
  int64_t *v = db->orow.v;
  if ((int64_t)ev->worker != v[1] >> 32 || ev->generation != v[0] ||
      ev->tick != v[3] || ev->attempt != 0 || ev->pages != 0 ||
      ev->bytes != 0 || !ev->detail)
    return 0;
  if (ev->kind == LSIM_EV_ITERATION_COMPLETED) {
    if (v[LSIM__IT_DONE] != LSIM_NONE || ev->request != LSIM_NONE ||
        ev->tenant != LSIM_NONE || ev->adapter != LSIM_NONE ||
        !db->o_result ||
        (ev->detail != db->o_result &&
         strcmp(ev->detail, db->o_result) != 0) ||
        ev->value != (db->o_ok ? db->o_rows : 0) || ev->seq < 0)
      return 0;
    v[LSIM__IT_DONE] = ev->seq;
    *packed = 1;
    return 0;
  }
  /* a debit: after its iteration_completed, room for it, and fields that
  ** fit their widths */
  int64_t done = v[LSIM__IT_DONE];
  if (done == LSIM_NONE || ev->seq <= done ||
      ev->seq - done > LSIM__DEBIT_OFF || ev->request == LSIM_NONE ||
      ev->tenant < -1 || ev->tenant >= LSIM__DEBIT_TENANT ||
      ev->adapter < -1 || ev->adapter >= LSIM__DEBIT_ADAPTER ||
      ev->value < 0 || ev->value > LSIM__DEBIT_VALUE ||
      db->olen + LSIM__DEBIT_LEN + 1 > LSIM__DEBITS_MAX)
    return 0;
  int64_t code = 0;
  lsim_err rc = lsim__cached_code(db, ev->detail, 1, &code);
  if (rc || code > LSIM__DEBIT_CODE)
    return rc;
  int64_t t = ev->tenant < 0 ? LSIM__DEBIT_TENANT : ev->tenant;
  int64_t a = ev->adapter < 0 ? LSIM__DEBIT_ADAPTER : ev->adapter;
  int64_t rest = code | (ev->seq - done) << 6 | t << 16 | a << 26 |
                   ev->value << 46;
  char *p = db->otext + db->olen;
  *p++ = db->olen == 0 ? '{' : ',';
  *p++ = '"';
  p = lsim__decimal(p, ev->request);
  *p++ = '"';
  *p++ = ':';
  db->last.set = 1;
  db->last.seq = ev->seq;
  db->last.request = ev->request;
  db->last.rest = rest;
  db->last.tenant = ev->tenant;
  db->last.adapter = ev->adapter;
  p = lsim__decimal(p, rest);
  db->olen = (size_t)(p - db->otext);
  *packed = 1;
  return 0;
}

/* A request that finished in this iteration: its kv_released and
** request_finished come right after its debit (engine/engine.c) and say
** little more: the KV pages freed (bytes = pages << a shift), the slot
** generation, the tokens produced and the detail.  They go into the
** row's fins, a JSON object like debits (NULL in most rows, so that a
** reader's json_each over it is short) whose member for the request is
** [rest, fin]: the debit's rest, and
**
**   fin = pages | generation << 16 | tokens << 32 | shift << 48 |
**         detail code << 53
**
** kv_released is held (db->kv) until its request_finished shows that both
** fit; anything else first sends it to event_log. */
#define LSIM__FIN_MAX 65535 /* pages, generation, tokens: 16 bits each */

/* ev, a kv_released right after the last debit, held. */
static void lsim__hold_kv(lsim_db *db, const lsim_event *ev, int *packed) {
  const int64_t *v = db->orow.v;
  if (!db->last.set || ev->seq != db->last.seq + 1 ||
      ev->request != db->last.request || ev->tenant != db->last.tenant ||
      ev->adapter != db->last.adapter || (int64_t)ev->worker != v[1] >> 32 ||
      ev->tick != v[3] || ev->attempt != 0 || ev->value != 0 || ev->detail ||
      ev->generation < 0 || ev->generation > LSIM__FIN_MAX ||
      ev->pages < 0 || ev->pages > LSIM__FIN_MAX || ev->bytes < 0)
    return;
  int shift = 0;
  if (ev->pages == 0 ? ev->bytes != 0 : ev->bytes % ev->pages != 0)
    return;
  if (ev->pages > 0) {
    int64_t unit = ev->bytes / ev->pages;
    while (shift < 31 && (INT64_C(1) << shift) < unit)
      shift++;
    if ((INT64_C(1) << shift) != unit)
      return; /* not a power of two */
  }
  db->kv = *ev;
  db->kv_shift = shift;
  db->kv_set = 1;
  *packed = 1;
}

/* ev, a request_finished: with the held kv_released into the last
** debit's member when both fit. */
static lsim_err lsim__pack_finished(lsim_db *db, const lsim_event *ev,
                                    int *packed) {
  const lsim_event *kv = &db->kv;
  if (ev->seq != kv->seq + 1 || ev->request != kv->request ||
      ev->tenant != kv->tenant || ev->adapter != kv->adapter ||
      ev->worker != kv->worker || ev->tick != kv->tick ||
      ev->generation != kv->generation || ev->attempt != 0 ||
      ev->pages != 0 || ev->bytes != 0 || ev->value < 0 ||
      ev->value > LSIM__FIN_MAX || !ev->detail ||
      db->flen + 2 * LSIM__DEBIT_LEN + 1 > LSIM__DEBITS_MAX)
    return 0;
  int64_t code = 0;
  lsim_err rc = lsim__cached_code(db, ev->detail, 1, &code);
  if (rc || code > LSIM__DEBIT_CODE)
    return rc;
  int64_t fin = kv->pages | kv->generation << 16 | ev->value << 32 |
                (int64_t)db->kv_shift << 48 | code << 53;
  char *p = db->ftext + db->flen;
  *p++ = db->flen == 0 ? '{' : ',';
  *p++ = '"';
  p = lsim__decimal(p, ev->request);
  *p++ = '"';
  *p++ = ':';
  *p++ = '[';
  p = lsim__decimal(p, db->last.rest);
  *p++ = ',';
  p = lsim__decimal(p, fin);
  *p++ = ']';
  db->flen = (size_t)(p - db->ftext);
  db->last.set = 0;
  db->kv_set = 0;
  *packed = 1;
  return 0;
}

lsim_err lsim_db_event(void *ud, const lsim_event *ev) {
  lsim_db *db = ud;
  lsim_err rc = lsim__append_ok(db, "lsim_db_event");
  if (rc)
    return rc;
  if (!lsim_event_kind_name(ev->kind)) {
    snprintf(db->err, sizeof db->err,
             "bug: event seq %lld has unknown kind %d (%s)",
             (long long)ev->seq, ev->kind, db->path);
    return LSIM_E_BUG;
  }
  int packed = 0;
  if (db->kv_set) {
    if (ev->kind == LSIM_EV_REQUEST_FINISHED &&
        (rc = lsim__pack_finished(db, ev, &packed)))
      return rc;
    if (db->kv_set) { /* not its request_finished: the held one is a row */
      db->kv_set = 0;
      if ((rc = lsim__log_event(db, &db->kv)))
        return rc;
    }
  }
  if (packed)
    ;
  else if (ev->kind == LSIM_EV_ITERATION_SELECTED)
    rc = lsim__hold_selected(db, ev, &packed);
  else if (db->open && (ev->kind == LSIM_EV_ITERATION_COMPLETED ||
                        ev->kind == LSIM_EV_COMPLETED_SERVICE_DEBITED))
    rc = lsim__pack_done(db, ev, &packed);
  else if (db->open && ev->kind == LSIM_EV_KV_RELEASED)
    lsim__hold_kv(db, ev, &packed);
  if (!rc && !packed)
    rc = lsim__log_event(db, ev);
  if (rc)
    return rc;
  db->events++;
  return lsim__count_row(db);
}

/* ev as an event_log row in the buffer. */
static lsim_err lsim__log_event(lsim_db *db, const lsim_event *ev) {
  int64_t code = 0;
  lsim_err rc;
  if (ev->detail && (rc = lsim__cached_code(db, ev->detail, 1, &code)))
    return rc;
  lsim__ev_row *r = &db->pend[db->npend++];
  r->seq = ev->seq;
  r->v[0] = ev->tick;
  r->v[1] = (int64_t)ev->kind | code << 16;
  r->v[2] = lsim__pair(ev->worker, ev->tenant);
  r->v[3] = lsim__pair(ev->attempt, ev->adapter); /* mostly 0 | adapter */
  r->v[4] = ev->request;
  r->v[5] = ev->generation;
  r->v[6] = ev->pages;
  r->v[7] = ev->bytes;
  r->v[8] = ev->value;
  return db->npend == LSIM__VT_ROWS ? lsim__flush_events(db) : 0;
}

/* Copy word w into a buffer slot; 0 when it does not fit. */
static int lsim__word(char *dst, const char *w) {
  if (!w) {
    dst[0] = '\0';
    return 1;
  }
  size_t n = strlen(w);
  if (n >= LSIM__WORD)
    return 0;
  memcpy(dst, w, n + 1);
  return 1;
}

lsim_err lsim_db_request(void *ud, const lsim_request_record *rec) {
  lsim_db *db = ud;
  lsim_err rc = lsim__append_ok(db, "lsim_db_request");
  if (rc)
    return rc;
  /* buffered like events, the outcome copied (the caller's string need
  ** not outlive the call); a word too long for the slot goes in at once,
  ** after the rows buffered before it */
  lsim__req_row *q = &db->rqpend[db->nrqpend];
  int64_t *v = q->v;
  v[0] = rec->request;
  v[1] = rec->tenant;
  v[2] = rec->adapter;
  v[3] = rec->worker;
  v[4] = rec->arrival_tick;
  v[5] = rec->first_token_tick;
  v[6] = rec->finish_tick;
  v[7] = rec->prompt_tokens;
  v[8] = rec->output_tokens;
  v[9] = rec->loads_waited;
  v[11] = rec->queue_wait_ticks;
  v[12] = rec->load_wait_ticks;
  v[13] = rec->prefill_ticks;
  v[14] = rec->decode_ticks;
  v[15] = rec->preemptions;
  v[16] = rec->cold;
  v[17] = rec->requested_tokens;
  if (!lsim__word(q->outcome, rec->outcome)) {
    if ((rc = lsim__flush_requests(db)))
      return rc;
    lsim__bind_request(db->req, q, rec->outcome);
    if ((rc = lsim__step(db, db->req, "insert request")))
      return rc;
    return lsim__count_row(db);
  }
  v[LSIM__RQ_OUTCOME] =
      rec->outcome ? LSIM__TEXT_REF(q->outcome - (const char *)db->rqpend,
                                    strlen(q->outcome))
                   : LSIM_NONE;
  if (++db->nrqpend == LSIM__VT_ROWS && (rc = lsim__flush_requests(db)))
    return rc;
  return lsim__count_row(db);
}

lsim_err lsim_db_iteration(lsim_db *db, const lsim_iter_record *it) {
  lsim_err rc = lsim__append_ok(db, "lsim_db_iteration");
  if (rc)
    return rc;
  /* buffered like events; `result` is a static string (db.h) */
  int64_t code = 0;
  if (it->result && (rc = lsim__cached_code(db, it->result, 1, &code)))
    return rc;
  if ((rc = lsim__close_open(db)))
    return rc;
  lsim__it_row row;
  int64_t *v = row.v;
  v[0] = it->iter;
  v[1] = lsim__pair(it->worker, (int)code);
  v[2] = it->start_tick;
  v[3] = it->end_tick;
  v[4] = it->prefill_rows;
  v[5] = it->decode_rows;
  v[6] = lsim__pair(it->prefill_reqs, it->decode_reqs);
  v[7] = lsim__pair(it->distinct_adapters, it->segments);
  v[8] = it->true_rank_rows;
  v[9] = it->padded_rank_rows;
  v[10] = it->backend_ns;
  v[11] = it->model_ns;
  v[12] = it->measured_ns;
  v[13] = it->ctx_tokens;
  v[LSIM__IT_SEL] = v[LSIM__IT_DONE] = v[LSIM__IT_DEBITS] =
      v[LSIM__IT_FINS] = LSIM_NONE;
  /* its events may go into it when the view can give them back: an
  ** iteration number that is not NULL, rows that add up */
  int64_t rows = 0;
  int packs = it->iter >= 0 &&
              !__builtin_add_overflow(it->prefill_rows, it->decode_rows,
                                      &rows) &&
              rows >= 0;
  int w = it->worker;
  if (w >= 0 && w < db->nheld && db->held[w].set) {
    const lsim__held *h = &db->held[w];
    if (packs && h->iter == it->iter && h->tick == it->start_tick &&
        h->value == rows) {
      v[LSIM__IT_SEL] = h->seq;
      db->held[w].set = 0;
      db->nheld_set--;
    } else if ((rc = lsim__spill(db, w))) {
      return rc;
    }
  }
  if (packs) {
    db->orow = row;
    db->open = 1;
    db->o_rows = rows;
    db->o_result = it->result;
    db->o_ok = it->result && strcmp(it->result, "ok") == 0;
    db->olen = db->flen = 0;
  } else {
    db->itpend[db->nitpend++] = row;
    if (db->nitpend == LSIM__VT_ROWS && (rc = lsim__flush_iters(db)))
      return rc;
  }
  return lsim__count_row(db);
}

lsim_err lsim_db_validation(lsim_db *db, const lsim_validation_record *v) {
  lsim_err rc = lsim__append_ok(db, "lsim_db_validation");
  if (rc)
    return rc;
  sqlite3_stmt *st = db->val;
  sqlite3_bind_int64(st, 1, v->iter);
  lsim__bind_str(st, 2, v->backend);
  lsim__bind_str(st, 3, v->reference);
  sqlite3_bind_double(st, 4, v->max_abs_err);
  sqlite3_bind_double(st, 5, v->max_rel_err);
  sqlite3_bind_int(st, 6, v->exact);
  if ((rc = lsim__step(db, st, "insert validation")))
    return rc;
  return lsim__count_row(db);
}

/* Buffered and written through lsim_rows like the other rows (one
** statement per row cost about 11,000 instructions a load); a kind word
** too long for the row's slot goes in at once, after the rows buffered
** before it. */
lsim_err lsim_db_load(lsim_db *db, const lsim_load_record *l) {
  lsim_err rc = lsim__append_ok(db, "lsim_db_load");
  if (rc)
    return rc;
  lsim__ld_row *q = &db->ldpend[db->nldpend];
  if (l->kind && lsim__word(q->kind, l->kind)) {
    int64_t *v = q->v;
    v[0] = l->load;
    v[LSIM__LD_KIND] = LSIM__TEXT_REF(q->kind - (const char *)db->ldpend,
                                      strlen(q->kind));
    v[2] = l->worker;
    v[3] = l->adapter;
    v[4] = l->attempt;
    v[5] = l->request;
    v[6] = l->bytes;
    v[7] = l->disk_bytes;
    v[8] = l->start_tick;
    v[9] = l->end_tick;
    v[10] = l->model_ns;
    v[11] = l->measured_ns;
    if (++db->nldpend == LSIM__VT_ROWS && (rc = lsim__flush_loads(db)))
      return rc;
    return lsim__count_row(db);
  }
  if ((rc = lsim__flush_loads(db)))
    return rc;
  sqlite3_stmt *st = db->lod;
  sqlite3_bind_int64(st, 1, l->load);
  lsim__bind_str(st, 2, l->kind);
  lsim__bind_opt(st, 3, l->worker);
  lsim__bind_opt(st, 4, l->adapter);
  lsim__bind_opt(st, 5, l->attempt);
  lsim__bind_opt(st, 6, l->request);
  sqlite3_bind_int64(st, 7, l->bytes);
  sqlite3_bind_int64(st, 8, l->disk_bytes);
  sqlite3_bind_int64(st, 9, l->start_tick);
  sqlite3_bind_int64(st, 10, l->end_tick);
  sqlite3_bind_int64(st, 11, l->model_ns);
  lsim__bind_opt(st, 12, l->measured_ns);
  if ((rc = lsim__step(db, st, "insert load")))
    return rc;
  return lsim__count_row(db);
}

lsim_err lsim_db_interval(lsim_db *db, const lsim_interval *iv, int starved) {
  lsim_err rc = lsim__append_ok(db, "lsim_db_interval");
  if (rc)
    return rc;
  /* the words are coded at once (their text need not outlive the call);
  ** both are required, as the columns were NOT NULL */
  int64_t kind = 0, closed = 0;
  if (!iv->kind || !iv->closed_by) {
    snprintf(db->err, sizeof db->err,
             "bug: starvation interval without a kind or closed_by (%s)",
             db->path);
    return LSIM_E_BUG;
  }
  if ((rc = lsim__cached_code(db, iv->kind, 0, &kind)) ||
      (rc = lsim__cached_code(db, iv->closed_by, 0, &closed)))
    return rc;
  int64_t *v = db->ivpend[db->nivpend].v;
  v[0] = lsim__pair(iv->worker, iv->entity);
  v[1] = iv->start;
  v[2] = iv->end;
  v[3] = (int64_t)((uint64_t)(uint32_t)starved << 32) | closed << 16 | kind;
  if (++db->nivpend == LSIM__VT_ROWS && (rc = lsim__flush_intervals(db)))
    return rc;
  return lsim__count_row(db);
}

lsim_err lsim_db_tenant(lsim_db *db, const lsim_db_tenant_row *t) {
  lsim_err rc = lsim__append_ok(db, "lsim_db_tenant");
  if (rc)
    return rc;
  sqlite3_stmt *st = db->ten;
  sqlite3_bind_int(st, 1, t->tenant);
  /* copied: the catalog's strings need not outlive the call */
  sqlite3_bind_text(st, 2, t->name ? t->name : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int64(st, 3, t->weight);
  sqlite3_bind_int64(st, 4, t->traffic_weight);
  if ((rc = lsim__step(db, st, "insert tenant")))
    return rc;
  return lsim__count_row(db);
}

lsim_err lsim_db_adapter(lsim_db *db, const lsim_db_adapter_row *a) {
  lsim_err rc = lsim__append_ok(db, "lsim_db_adapter");
  if (rc)
    return rc;
  sqlite3_stmt *st = db->adp;
  sqlite3_bind_int(st, 1, a->adapter);
  sqlite3_bind_text(st, 2, a->name ? a->name : "", -1, SQLITE_TRANSIENT);
  sqlite3_bind_int(st, 3, a->owner);
  sqlite3_bind_int(st, 4, a->rank);
  sqlite3_bind_int64(st, 5, a->bytes);
  sqlite3_bind_int64(st, 6, a->pages);
  sqlite3_bind_text(st, 7, a->targets ? a->targets : "", -1,
                    SQLITE_TRANSIENT);
  if ((rc = lsim__step(db, st, "insert adapter")))
    return rc;
  return lsim__count_row(db);
}

/* Allowed while the run is in progress (batched with the rest) and after
** it ended (then each figure commits on its own). */
lsim_err lsim_db_summary(lsim_db *db, const char *key, double value) {
  if (db->broken)
    return LSIM_E_DB;
  if (db->state == LSIM__OPEN) {
    snprintf(db->err, sizeof db->err,
             "bug: lsim_db_summary before the run began (%s)", db->path);
    return LSIM_E_BUG;
  }
  if (!key) {
    snprintf(db->err, sizeof db->err, "bug: summary figure without a key (%s)",
             db->path);
    return LSIM_E_BUG;
  }
  sqlite3_bind_text(db->sum, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_double(db->sum, 2, value);
  lsim_err rc = lsim__step(db, db->sum, "insert summary");
  if (rc || db->state != LSIM__RUNNING)
    return rc;
  return lsim__count_row(db);
}

/* PRAGMA wal_checkpoint(TRUNCATE): every committed frame copied into the
** main file and the WAL emptied; SQLite's own reason on failure.  The
** pragma's first column is 1 when a reader or writer kept it from
** finishing, which counts as a failure here. */
static lsim_err lsim__checkpoint(lsim_db *db, lsim_errbuf *eb) {
  int log = -1, done = -1;
  int rc = sqlite3_wal_checkpoint_v2(db->h, NULL, SQLITE_CHECKPOINT_TRUNCATE,
                                     &log, &done);
  if (rc != SQLITE_OK)
    return lsim_fail(eb, LSIM_E_DB, "%s: checkpoint: %s", db->path,
                     sqlite3_errmsg(db->h));
  if (log != done)
    return lsim_fail(eb, LSIM_E_DB,
                     "%s: checkpoint: %d of %d frames copied", db->path, done,
                     log);
  return 0;
}

/* After a failed checkpoint: the run becomes 'failed' with the reason in
** eb, as far as the disk that refused the checkpoint lets that be written
** (otherwise it stays 'running' or, after step 3, keeps a status the exit
** code contradicts; never silently).  The spine is broken from here. */
static void lsim__mark_failed(lsim_db *db, const lsim_errbuf *eb) {
  char why[600];
  snprintf(why, sizeof why, "%s", eb ? eb->msg : "checkpoint failed");
  sqlite3_stmt *un = NULL;
  if (sqlite3_prepare_v2(db->h,
                         "UPDATE runs SET status='failed', error=?1 "
                         "WHERE run_id=1",
                         -1, &un, NULL) == SQLITE_OK) {
    sqlite3_bind_text(un, 1, why, -1, SQLITE_TRANSIENT);
    (void)sqlite3_step(un);
  }
  sqlite3_finalize(un);
  db->broken = 1;
}

lsim_err lsim_db_end_run(lsim_db *db, const char *status, const char *error,
                         lsim_tick end_tick, lsim_errbuf *eb) {
  if (!db || db->state != LSIM__RUNNING)
    return LSIM_BUG(eb, "lsim_db_end_run without a run in progress");
  if (!status || (strcmp(status, "ok") != 0 && strcmp(status, "failed") != 0 &&
                  strcmp(status, "interrupted") != 0))
    return LSIM_BUG(eb, "lsim_db_end_run: status must be ok, failed or "
                        "interrupted");
  if (db->broken)
    return lsim_fail(eb, LSIM_E_DB, "run left as 'running', an earlier write "
                                    "failed: %s", db->err);

  /* 1. the last batch */
  lsim_err rc = lsim__flush(db);
  if (rc)
    return lsim_fail(eb, rc, "%s", db->err);
  if (sqlite3_exec(db->h, "COMMIT", NULL, NULL, NULL) != SQLITE_OK) {
    lsim__append_fail(db, "commit");
    return lsim_fail(eb, LSIM_E_DB, "%s", db->err);
  }
  db->batch_rows = 0;
  int ok = strcmp(status, "ok") == 0;

  /* 2. an ok run: every row folded into the main file before the status
  ** (the main file grows here, so a full disk fails here, status still
  ** 'running') */
  if (ok && (rc = lsim__checkpoint(db, eb))) {
    lsim__mark_failed(db, eb);
    return rc;
  }

  /* 3. the status */
  sqlite3_stmt *st = NULL;
  if ((rc = lsim__exec(db, "PRAGMA synchronous=NORMAL", "set pragmas", eb)) ||
      (rc = lsim__prepare(db,
                          "UPDATE runs SET status=?1, error=?2, events=?3, "
                          "end_tick=?4 WHERE run_id=?5",
                          &st, eb))) {
    db->broken = 1;
    return rc;
  }
  lsim__bind_str(st, 1, status);
  lsim__bind_str(st, 2, error);
  sqlite3_bind_int64(st, 3, db->events);
  sqlite3_bind_int64(st, 4, end_tick);
  sqlite3_bind_int(st, 5, LSIM__RUN_ID);
  int step = sqlite3_step(st);
  sqlite3_finalize(st);
  if (step != SQLITE_DONE || sqlite3_changes(db->h) != 1) {
    db->broken = 1;
    return lsim_fail(eb, LSIM_E_DB, "%s: set run status: %s", db->path,
                     step != SQLITE_DONE ? sqlite3_errmsg(db->h)
                                         : "run row missing");
  }
  /* 4. the status folded in too: a .db copied alone, without its -wal,
  ** reads 'ok' with every row.  If that fails the status is taken back
  ** (best effort: the disk that refused the checkpoint may refuse this). */
  if (ok && (rc = lsim__checkpoint(db, eb))) {
    lsim__mark_failed(db, eb);
    return rc;
  }
  db->state = LSIM__ENDED;
  return 0;
}

/* ---- accessors ------------------------------------------------------------------ */

const char *lsim_db_failure(const lsim_db *db) {
  return db && db->err[0] ? db->err : NULL;
}

const char *lsim_db_errmsg(lsim_db *db) {
  if (!db)
    return "no database";
  if (db->err[0])
    return db->err;
  return db->h ? sqlite3_errmsg(db->h) : "no database";
}

/* The buffered events are written first (D2), so report queries on the
** handle see every appended row.  A failed flush is kept for the next
** append or lsim_db_end_run to report. */
sqlite3 *lsim_db_handle(lsim_db *db) {
  if (!db)
    return NULL;
  if (db->state == LSIM__RUNNING && !db->broken && lsim__pending(db) > 0)
    (void)lsim__flush(db);
  return db->h;
}

int64_t lsim_db_event_count(const lsim_db *db) { return db ? db->events : 0; }

lsim_err lsim_db_check_target(const char *path, lsim_errbuf *eb) {
  struct stat st;
  if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0)
    return 0;
  char head[16] = {0};
  FILE *f = fopen(path, "rb");
  size_t n = f ? fread(head, 1, sizeof head, f) : 0;
  if (f)
    fclose(f);
  int is_db = 0;
  if (n == sizeof head && memcmp(head, "SQLite format 3", 16) == 0) {
    sqlite3 *h = NULL;
    sqlite3_stmt *q = NULL;
    if (sqlite3_open_v2(path, &h, SQLITE_OPEN_READONLY, NULL) == SQLITE_OK &&
        sqlite3_prepare_v2(h,
                           "SELECT 1 FROM sqlite_master WHERE type = 'table' "
                           "AND name = 'runs'",
                           -1, &q, NULL) == SQLITE_OK &&
        sqlite3_step(q) == SQLITE_ROW)
      is_db = 1;
    sqlite3_finalize(q);
    sqlite3_close(h);
  }
  if (!is_db)
    return lsim_fail(eb, LSIM_E_OUT_NOT_DB,
                     "%s: exists and is not a lorasim database: refusing to "
                     "replace it (remove it or choose another --db)",
                     path);
  return 0;
}

int lsim_db_has_column(sqlite3 *h, const char *table, const char *col) {
  sqlite3_stmt *st = NULL;
  int found = 0;
  if (sqlite3_prepare_v2(h,
                         "SELECT 1 FROM pragma_table_info(?1) WHERE name = ?2",
                         -1, &st, NULL) == SQLITE_OK) {
    sqlite3_bind_text(st, 1, table, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, col, -1, SQLITE_STATIC);
    found = sqlite3_step(st) == SQLITE_ROW;
  }
  sqlite3_finalize(st);
  return found;
}
