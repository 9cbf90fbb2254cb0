# shellcheck shell=bash
# steps.sh — run every step of a test command, whatever fails, and report every failure at the end.
#
#   source scripts/lib/steps.sh
#   step "unit and integration tests" cargo test --no-fail-fast …
#   step "micro-benchmarks" cargo test --bench micro -- --test
#   steps_summary          # prints what failed (each step, and each failing test and test binary
#                          # its output names) and returns non-zero when anything did
#
# A step's output goes to the terminal as it runs and to a log kept for the summary. scripts/test
# uses it; tests/e2e/test_command.rs runs it on small commands, one failing.

STEPS_RUN=()
STEPS_FAILED=()
STEPS_LOG_DIR="$(mktemp -d "${TMPDIR:-/tmp}/mcpgate-steps.XXXXXX")"

# step NAME COMMAND... : runs COMMAND, records whether it failed, never stops the caller.
step() {
  local name="$1"; shift
  local log; log="$STEPS_LOG_DIR/${#STEPS_RUN[@]}.log"
  STEPS_RUN+=("$name")
  echo "== $name: $*"
  local rc errexit=0
  [[ $- == *e* ]] && errexit=1
  set +e
  "$@" 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  [[ $errexit == 1 ]] && set -e
  if [[ $rc != 0 ]]; then
    STEPS_FAILED+=("$name (exit $rc)")
    {
      echo "FAILED STEP: $name (exit $rc)"
      # libtest's failing tests, and cargo's list of the test binaries that failed (--no-fail-fast).
      grep -E '^test .* \.\.\. FAILED$' "$log" | sed -E 's/^test (.*) \.\.\. FAILED$/  failed test: \1/' || true
      sed -n '/^error: [0-9]* targets\? failed:$/,/^[^ ]/p' "$log" | grep -E '^ +`' | sed -E 's/^ +/  failed target: /' || true
    } >> "$STEPS_LOG_DIR/failures"
  fi
  return 0
}

# steps_summary : names every step that ran and every failure; non-zero when any step failed.
steps_summary() {
  echo
  echo "== summary: ${#STEPS_RUN[@]} steps run, ${#STEPS_FAILED[@]} failed"
  local s
  for s in "${STEPS_RUN[@]}"; do echo "  ran: $s"; done
  if [[ ${#STEPS_FAILED[@]} -gt 0 ]]; then
    cat "$STEPS_LOG_DIR/failures"
    rm -rf "$STEPS_LOG_DIR"
    return 1
  fi
  rm -rf "$STEPS_LOG_DIR"
  return 0
}
