#!/bin/sh
# Regenerates src/generated.rs from schema/tflite.fbs with planus-cli, whose version must
# match the `planus` runtime crate pinned in Cargo.toml:
#     cargo install planus-cli --version 1.3.0 --locked
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
want=1.3.0
# planus-cli has no --version flag: ask cargo which version it installed.
have=$(cargo install --list | sed -n 's/^planus-cli v\([0-9.]*\):$/\1/p')
if [ "$have" != "$want" ]; then
    echo "planus-cli $have found, $want needed (the runtime crate's version)" >&2
    exit 1
fi
planus rust -o "$here/src/generated.rs" "$here/schema/tflite.fbs"
