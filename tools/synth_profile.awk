# synth_profile.awk: a synthetic measurement file for `lorasim profile
# --fit`, from the grid of a dry run and known coefficients plus noise.
# It made tests/fixtures/profile/synthetic-8b.csv (tests/fixtures/profile/
# README.md says how); nothing here was measured on a GPU.
#
#   lorasim profile --model llama-3-8b --quick --target-sets qv,qkvo,all \
#       --dry-run --csv grid.csv
#   awk -v seed=20261206 -v reps=3 -v noise=0.03 \
#       -f tools/synth_profile.awk grid.csv > synthetic-8b.csv
#
# Each point gets `reps` rows, its modelled time (the formula of
# docs/PROFILE.md with the coefficients below) times 1 + u, u uniform in
# [-noise, noise]; then copy rows of 1 MiB to 1 GiB (x8), latency + bytes /
# gbps times the same noise.
BEGIN {
  FS = ","; OFS = ","
  if (seed == "") seed = 20261206
  if (reps == "") reps = 3
  if (noise == "") noise = 0.03
  srand(seed)
  # the coefficients (ns; knee in tokens)
  fixed = 60000; gemm = 3200000; knee = 180; lm = 220000; tok = 150
  drow = 2000; dctx = 28; pseq = 5000; ppair = 1.1
  lmod = 1500; lseg = 40; lelem = 0.00002
  clat = 12000; cgbps = 50
}
function roof(n) { return n <= 0 ? 0 : (n > knee ? n / knee : 1) }
function jitter() { return 1 + noise * (2 * rand() - 1) }
NR == 1 { print; next }
$1 == "iter" {
  t = fixed + gemm * roof($6) + lm * roof($7) + tok * $6 + drow * $8 \
      + dctx * $9 + pseq * $10 + ppair * $11 + ($12 ? lmod * $15 : 0) \
      + lseg * $13 * $15 + lelem * $14 * $16
  last = $2
  for (r = 0; r < reps; r++) {
    $5 = r; $20 = int(t * jitter() + 0.5)
    print
  }
}
END {
  p = last + 1
  for (mib = 1; mib <= 1024; mib *= 8) {
    b = mib * 1048576
    for (r = 0; r < reps; r++)
      print "copy", p, "h2d", "-", r, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, \
            b, int((clat + b / cgbps) * jitter() + 0.5)
    p++
  }
}
