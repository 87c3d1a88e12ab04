#!/bin/sh
# `make fuzz`: every fuzz target (or those in FUZZ_TARGETS) for FUZZ_SECONDS seconds each
# (default 60), single process, seeded from fixtures/. New corpus entries go to
# target/fuzz-corpus/<target>; a crash or hang stops the run and leaves its input in
# fuzz/artifacts/<target>/ — copy it to fixtures/fuzz/regressions/<target>/ so
# tests/fuzz_regressions.rs replays it in `make test`.
# Needs the nightly toolchain and cargo-fuzz (`cargo install cargo-fuzz`).
set -eu
cd "$(dirname "$0")/.."
each=${FUZZ_SECONDS:-60}
seeds() {
    case $1 in
        rpc_input) echo fixtures/fuzz/rpc_input ;;
        session_file) echo fixtures/sessions ;;
        export_html) echo fixtures/sessions fixtures/fuzz/export_html ;;
        config_files) echo fixtures/fuzz/config_files ;;
        tool_arguments) echo fixtures/fuzz/tool_arguments ;;
        error_body) echo fixtures/fuzz/error_body ;;
        extension_message) echo fixtures/fuzz/extension_message ;;
        provider_mistral | provider_codex) echo fixtures/openai fixtures/anthropic ;;
        provider_bedrock) echo fixtures/fuzz/provider_bedrock ;;
        sse | provider_*) echo fixtures/anthropic fixtures/openai fixtures/google ;;
        resource_file)
            echo fixtures/fuzz/resource_file
            # The 839 frontmatter cases recorded from pi, one file each (needs python3).
            if command -v python3 >/dev/null; then
                mkdir -p target/fuzz-seeds/resource_file
                python3 -c 'import json,sys
for i,c in enumerate(json.load(open(sys.argv[1]))):
    open("%s/case%03d.md" % (sys.argv[2], i), "w").write(c["input"])' \
                    fixtures/skills/frontmatter_pi_0.73.1.json target/fuzz-seeds/resource_file
                echo target/fuzz-seeds/resource_file
            fi
            ;;
        mcp_message) echo fixtures/fuzz/mcp_message ;;
        bash_split) echo fixtures/fuzz/bash_split ;;
        permission_rule) echo fixtures/fuzz/permission_rule ;;
    esac
    if [ -d "fixtures/fuzz/regressions/$1" ]; then echo "fixtures/fuzz/regressions/$1"; fi
}
targets=${FUZZ_TARGETS:-$(cargo +nightly fuzz list --fuzz-dir fuzz)}
for t in $targets; do
    corpus=target/fuzz-corpus/$t
    mkdir -p "$corpus"
    echo "== fuzz $t (${each}s)"
    # shellcheck disable=SC2046
    cargo +nightly fuzz run --fuzz-dir fuzz -O "$t" "$corpus" $(seeds "$t") -- \
        -max_total_time="$each" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1
done
