#!/usr/bin/env bash
# The CUDA env on the GPU host (issue 26): its own /opt/torch/.venv (a uv venv with CUDA torch) packed the RunPod
# way with pzstd frames, indexed, restored relocated by `vault restore env`, then a CUDA matmul run by the
# restored env's python from `cd /` with a bare PATH. Timed beside the plain untar of the same archive.
# Run from a checkout with cloudvault importable (PYTHONPATH) and zstd/pzstd on PATH. Results go to $OUT.
set -euo pipefail
SRC=${SRC:-/opt/torch/.venv}
W=${W:-/tmp/vault-env-cuda}
OUT=${OUT:-$W/out}
CORES=${CORES:-$(nproc)}
ENTRY="$W/mirror/017_runpod_pro6000_workspace_mirror/data/workspace/cs/backup"
ARCHIVE="$ENTRY/env-torch.tar.zst"
if [ -n "${REUSE:-}" ] && [ -s "$ARCHIVE" ]; then  # the archive of an earlier run: no pack, no anchors again
  rm -rf "$W/restored" "$W/c.db"* && PACK=
else
  rm -rf "$W" && PACK=1
fi
mkdir -p "$ENTRY" "$W/recipes/env" "$OUT"
NAME=$(basename "$SRC")
timed() {  # label command...: wall seconds and the largest child's peak RSS (KiB) as one JSON line
  python3 - "$@" <<'PY'
import json, resource, subprocess, sys, time
label, argv = sys.argv[1], sys.argv[2:]
t = time.monotonic()
done = subprocess.run(argv, capture_output=True, text=True)
wall = time.monotonic() - t
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"step": label, "rc": done.returncode, "wall_s": round(wall, 2), "peak_rss_kib": rss,
                  "tail": (done.stdout + done.stderr)[-1500:]}))
PY
}
{
  if [ -n "$PACK" ]; then
  timed pack bash -c "tar -C $(dirname "$SRC") -cf - $NAME | pzstd -q -3 -p $CORES -c > $ARCHIVE"
  du -b "$ARCHIVE" | awk '{print "{\"archive_bytes\": " $1 "}"}'
  du -sb "$SRC" | awk '{print "{\"raw_bytes\": " $1 "}"}'
  tar -tf <(zstd -dc "$ARCHIVE") | wc -l | awk '{print "{\"members\": " $1 "}"}'
  fi
  if [ -n "$PACK" ] && [ "${ANCHORS:-1}" = 1 ]; then
  mkdir -p "$W/a1" "$W/a2"
  timed "anchor pzstd -dc -p $CORES | tar -x" bash -c "pzstd -dc -q -p $CORES $ARCHIVE | tar -x -C $W/a1"
  rm -rf "$W/a1"
  timed "anchor zstd -dc | tar -x" bash -c "zstd -dc -q $ARCHIVE | tar -x -C $W/a2"
  rm -rf "$W/a2"
  fi
  printf 'description = "the GPU host CUDA env"\nentry = "017"\narchives = "data/workspace/cs/backup/env-*.tar.zst"\nroot = "%s"\n' \
    "$(dirname "$SRC")" > "$W/recipes/env/torchpod.toml"
  export VAULT_RECIPES="$W/recipes"
  timed index python3 -m cloudvault --catalog "$W/c.db" index -q "$W/mirror"
  timed list python3 -m cloudvault --catalog "$W/c.db" restore env torchpod --list
  timed "vault restore env (relocated)" bash -c "python3 -m cloudvault --catalog $W/c.db restore env torchpod \
    $NAME --prefix $W/restored/torch-env --json > $OUT/restore_relocated.json"
  timed "vault restore env (relocated, longer prefix)" bash -c "python3 -m cloudvault --catalog $W/c.db restore env \
    torchpod $NAME --prefix $W/restored/a-much-longer-prefix-than-the-pod-used/torch-env --json > $OUT/restore_longer.json"
  cd /
  timed matmul env -i PATH=/usr/bin:/bin HOME=/tmp "$W/restored/torch-env/bin/python" -c "
import sys, torch
a = torch.randn(8192, 8192, device='cuda', dtype=torch.float16)
torch.cuda.synchronize()
c = a @ a
torch.cuda.synchronize()
print(sys.prefix, torch.__file__, torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0), float(c.float().abs().mean()))
"
  timed pip-version env -i PATH=/usr/bin:/bin HOME=/tmp "$W/restored/torch-env/bin/python" -m pip --version
  cat "$W/restored/torch-env/pyvenv.cfg"
  ls -l "$W/restored/torch-env/bin" | grep python || true
} 2>&1 | tee "$OUT/env_cuda.jsonl"
[ -n "${KEEP:-}" ] || rm -rf "$W/restored" "$W/mirror"
