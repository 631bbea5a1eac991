#!/bin/sh
# check_prom_selftest.sh CHECK_PROM WORKDIR: tools/check_prom.sh against small
# files that each break one rule (it must exit 1 and name the rule), and
# one that keeps them all (exit 0).
set -eu
check=$1 work=$2
rm -rf "$work"
mkdir -p "$work"
fail=0

good='# HELP lorasim_x_total things
# TYPE lorasim_x_total counter
lorasim_x_total{kind="a"} 1
lorasim_x_total{kind="b"} 2
# HELP lorasim_y_seconds a time
# TYPE lorasim_y_seconds summary
lorasim_y_seconds{quantile="0.5"} 0.25
lorasim_y_seconds_sum 1.5
lorasim_y_seconds_count 4
# HELP lorasim_z_bytes a size
# TYPE lorasim_z_bytes histogram
lorasim_z_bytes_bucket{le="1024"} 3
lorasim_z_bytes_bucket{le="+Inf"} 4
lorasim_z_bytes_sum 5000
lorasim_z_bytes_count 4
# HELP lorasim_g_ratio a ratio
# TYPE lorasim_g_ratio gauge
lorasim_g_ratio 0.5'

# expect NAME WANT TEXT: TEXT is refused with a line containing WANT
expect() {
  printf '%s\n' "$3" >"$work/$1.prom"
  if out=$(sh "$check" "$work/$1.prom" 2>&1); then
    echo "FAIL $1: accepted" >&2
    fail=1
  elif ! printf '%s\n' "$out" | grep -qF -- "$2"; then
    echo "FAIL $1: no '$2' in: $out" >&2
    fail=1
  else
    echo "ok   $1: $out" | head -1
  fi
}

printf '%s\n' "$good" >"$work/good.prom"
if ! out=$(sh "$check" "$work/good.prom" 2>&1); then
  echo "FAIL good: refused: $out" >&2
  fail=1
fi

expect counter_without_total "must end in _total" \
'# HELP lorasim_units a
# TYPE lorasim_units counter
lorasim_units 3'
expect gauge_with_total "must not end in _total" \
'# HELP lorasim_peak_total a
# TYPE lorasim_peak_total gauge
lorasim_peak_total 3'
expect no_prefix "not lorasim_" \
'# HELP adapter_hits_total a
# TYPE adapter_hits_total counter
adapter_hits_total 3'
expect prefix_twice "prefix twice" \
'# HELP lorasim_lorasim_hits_total a
# TYPE lorasim_lorasim_hits_total counter
lorasim_lorasim_hits_total 3'
expect no_help "no HELP line" \
'# TYPE lorasim_hits_total counter
lorasim_hits_total 3'
expect empty_help "empty HELP" \
'# HELP lorasim_hits_total
# TYPE lorasim_hits_total counter
lorasim_hits_total 3'
expect no_type "without a TYPE line" \
'lorasim_hits_total 3'
expect two_types "two TYPE lines" \
'# HELP lorasim_hits_total a
# TYPE lorasim_hits_total counter
# TYPE lorasim_hits_total counter
lorasim_hits_total 3'
expect summary_no_sum "without lorasim_t_seconds_sum" \
'# HELP lorasim_t_seconds a
# TYPE lorasim_t_seconds summary
lorasim_t_seconds{quantile="0.5"} 1
lorasim_t_seconds_count 2'
expect summary_no_count "without lorasim_t_seconds_count" \
'# HELP lorasim_t_seconds a
# TYPE lorasim_t_seconds summary
lorasim_t_seconds_sum 2'
expect summary_no_quantile "without a quantile label" \
'# HELP lorasim_t_seconds a
# TYPE lorasim_t_seconds summary
lorasim_t_seconds 1
lorasim_t_seconds_sum 2
lorasim_t_seconds_count 2'
expect histogram_no_inf "le=\"+Inf\"" \
'# HELP lorasim_h_bytes a
# TYPE lorasim_h_bytes histogram
lorasim_h_bytes_bucket{le="1"} 1
lorasim_h_bytes_sum 1
lorasim_h_bytes_count 1'
expect gauge_sum "has no _sum samples" \
'# HELP lorasim_g a
# TYPE lorasim_g gauge
lorasim_g 1
lorasim_g_sum 1'
expect quantile_on_gauge "quantile label outside a summary" \
'# HELP lorasim_g a
# TYPE lorasim_g gauge
lorasim_g{quantile="0.5"} 1'
expect milliseconds "base units (_ms)" \
'# HELP lorasim_wait_ms a
# TYPE lorasim_wait_ms gauge
lorasim_wait_ms 1'
expect not_a_number "is not a number" \
'# HELP lorasim_g a
# TYPE lorasim_g gauge
lorasim_g one'
expect interleaved "not contiguous" \
'# HELP lorasim_a_total a
# TYPE lorasim_a_total counter
# HELP lorasim_b_total b
# TYPE lorasim_b_total counter
lorasim_a_total{k="1"} 1
lorasim_b_total 1
lorasim_a_total{k="2"} 1'
exit "$fail"
