# Sourced by the dense decode's two-way GPU scripts that time the working tree's source against an older one (carry
# build/oldsrc: `git archive REV src | tar -x -C build/oldsrc`), after they set BUDGET: sources budget.sh, sets NEW,
# OLD and SHA (the script's first argument), and defines
#   ab_bench PREFIX TAG SIDE LIMIT REPS ARGS...   `wavemla bench --dense` of SIDE (new or old) into
#                                                 $OUT/PREFIX-SIDE-TAG.json
#   ab_tables NAME PREFIX PHASE...                the A/B table per PHASE appended to $OUT/NAME.log, the JSONs packed
#                                                 into $OUT/NAME.tar.gz
. "$(dirname "${BASH_SOURCE[0]}")/../budget.sh"
NEW=$PWD/src
OLD=$PWD/build/oldsrc/src
SHA=${1:-}
ab_bench() {
  local prefix=$1 tag=$2 side=$3 limit=$4 reps=$5 src=$NEW; shift 5
  [ "$side" = old ] && src=$OLD
  PYTHONPATH=$src step "$limit" python3 -m wavemla.cli bench --dense --reps "$reps" "$@" \
    --json "$OUT/$prefix-$side-$tag.json" --label "${SHA:-}"
}
ab_tables() {
  local name=$1 prefix=$2 phase; shift 2
  for phase in "$@"; do
    python3 "$(dirname "${BASH_SOURCE[0]}")/dense_ab_table.py" "$OUT" "$prefix" new old "$phase" | tee -a "$OUT/$name.log"
  done
  tar czf "$OUT/$name.tar.gz" -C "$OUT" $(cd "$OUT" && ls "$prefix"-*.json) && rm -f "$OUT/$prefix"-*.json
}
