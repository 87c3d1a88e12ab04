#!/usr/bin/env bash
# check.sh ORACLE [REGEX] [--compat 0.87]: run these scenarios against pi (0.73.1, or 0.87.1 with
# --compat 0.87) and against target/release/pith ($PITH_BIN to override), drop pith's documented deviations
# (ORACLE/deviations.py), and compare stdout and requests (ORACLE/compare.py).
# From the worktree: tests/scenarios/skills/check.sh ../../oh/h04/oracle
set -u
ORACLE="$(cd "$1" && pwd)"; shift
REGEX="${1:-.}"; shift || true
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
BIN="${PITH_BIN:-$(cd "$HERE/../../.." && pwd)/target/release/pith}"
T="$ORACLE/transcripts"
if [ "${1:-}" = "--compat" ] && [ "${2:-}" = "0.87" ]; then
  REF=(--label sk-pi87 -- "$ORACLE/ref-latest/pi" --mode rpc); OURS=(--mode rpc --compat 0.87); L=87; KEEP=--keep-settled
else
  REF=(--label sk-pi); OURS=(--mode rpc); L=73; KEEP=
fi
"$ORACLE/run_all.sh" -j 2 -s "$HERE" -o "$REGEX" "${REF[@]}" >/dev/null
"$ORACLE/run_all.sh" -j 2 -s "$HERE" -o "$REGEX" -l sk-pith$L -- "$BIN" "${OURS[@]}" >/dev/null
rm -rf "$T/sk-ref-cmp$L" "$T/sk-pith-cmp$L"
python3 "$ORACLE/deviations.py" $KEEP "$T/${REF[1]}" "$T/sk-ref-cmp$L"
python3 "$ORACLE/deviations.py" $KEEP "$T/sk-pith$L" "$T/sk-pith-cmp$L"
same=0; total=0
for f in "$HERE"/*.json; do
  s=$(basename "$f" .json); [[ $s =~ $REGEX ]] || continue
  total=$((total+1))
  if python3 "$ORACLE/compare.py" "$T/sk-ref-cmp$L/$s.jsonl" "$T/sk-pith-cmp$L/$s.jsonl" >/tmp/sk-check-$s.out 2>&1 &&
     python3 "$ORACLE/compare.py" --requests "$T/sk-ref-cmp$L/$s.requests.jsonl" "$T/sk-pith-cmp$L/$s.requests.jsonl" >>/tmp/sk-check-$s.out 2>&1; then
    same=$((same+1)); echo "SAME $s"
  else echo "DIFF $s (/tmp/sk-check-$s.out)"; fi
done
echo "skills scenarios: $same/$total same as pi 0.$L"
