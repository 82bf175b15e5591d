#!/usr/bin/env python3
"""ShardLab's files read back by the official tools, on the GPU machine (device_check.sh): the
`safetensors` package (Hugging Face) and the `tensorboard` package's own event reader, which the
CI machines cannot install (tst_safetensors and tst_export_files use independent readers there).

  ecosystem_check.py --shardlab BIN --work DIR --json OUT.json

In --work, device_check.sh left, per job J (fashion_mlp, chars_gpt): J_cpu.safetensors and
J_cpu.slmodel (the same CPU run twice: one BLAS thread, deterministic), J_cuda.safetensors and
J_cuda.slrec (the GPU run's recording). Checks:
  safetensors  every tensor of J_cpu.safetensors, loaded by safetensors.numpy.load_file, equals
               bit for bit its slice of the native model file J_cpu.slmodel (format:
               engine/model/model_file.h; slice = the tensor's data_offsets in the header)
  tensorboard  `shardlab export J_cuda.slrec --tensorboard TB --csv CSV`, read back with
               tensorboard.backend.event_processing.event_file_loader.EventFileLoader: every
               train/* and time/step_seconds scalar equal (float32) to the CSV's, same steps
  gpu_vs_cpu   max |cuda - cpu| / max |cpu| over the final parameters (a figure; the pass/fail
               rule for GPU training is `shardlab doctor`'s)
Exit 0 when every check passed.
"""
import argparse
import glob
import json
import os
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np


def read_native(path):
    data = open(path, "rb").read()
    if data[:8] != b"SLMODEL\0":
        raise ValueError(f"{path}: not a ShardLab model file")
    version, = struct.unpack_from("<I", data, 8)
    params, = struct.unpack_from("<q", data, 12)
    count, = struct.unpack_from("<q", data, 24)
    if version != 1 or count != params:
        raise ValueError(f"{path}: version {version}, {params} params, {count} floats")
    floats = np.frombuffer(data, "<f4", count, 32)
    crc, = struct.unpack_from("<I", data, 32 + 4 * count)
    if zlib.crc32(data[:32 + 4 * count]) != crc:
        raise ValueError(f"{path}: CRC-32 mismatch")
    return floats


def header_offsets(path):
    with open(path, "rb") as f:
        n, = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(n))
    return {k: v["data_offsets"] for k, v in header.items() if k != "__metadata__"}


def check_safetensors(work, job):
    from safetensors.numpy import load_file
    st = os.path.join(work, f"{job}_cpu.safetensors")
    native = read_native(os.path.join(work, f"{job}_cpu.slmodel"))
    tensors = load_file(st)
    offsets = header_offsets(st)
    covered = 0
    bad = []
    for name, arr in tensors.items():
        lo, hi = offsets[name]
        want = native[lo // 4:hi // 4]
        covered += hi - lo
        if arr.dtype != np.float32 or arr.size != want.size or not np.array_equal(
                arr.reshape(-1).view(np.uint32), want.view(np.uint32)):
            bad.append(name)
    ok = not bad and covered == 4 * native.size
    return {"job": job, "tensors": len(tensors), "params": int(native.size),
            "unequal": bad, "covers_all": covered == 4 * native.size, "ok": ok}


def check_tensorboard(shardlab, work, job):
    from tensorboard.backend.event_processing.event_file_loader import EventFileLoader
    from tensorboard.util import tensor_util
    rec = os.path.join(work, f"{job}_cuda.slrec")
    tb = tempfile.mkdtemp(prefix="tb_", dir=work)
    csv = os.path.join(work, f"{job}_cuda.csv")
    subprocess.run([shardlab, "export", rec, "--tensorboard", tb, "--csv", csv], check=True,
                   capture_output=True, text=True)
    files = glob.glob(os.path.join(tb, "rank0", "events.out.tfevents.*"))
    if len(files) != 1:
        return {"job": job, "ok": False, "why": f"{len(files)} event files for rank 0"}
    got = {}
    for event in EventFileLoader(files[0]).Load():
        for v in event.summary.value:
            if v.HasField("simple_value"):
                value = v.simple_value
            else:  # the loader may migrate simple values to tensors
                value = float(tensor_util.make_ndarray(v.tensor))
            got.setdefault(v.tag, {})[event.step] = value
    want = {}
    lines = open(csv).read().splitlines()
    cols = {"train/loss": 2, "train/lr": 3, "train/grad_norm": 4, "train/throughput": 5,
            "time/step_seconds": 6}
    for line in lines[1:]:
        c = line.split(",")
        if len(c) < 7 or c[0] != "0":
            continue
        for tag, i in cols.items():
            want.setdefault(tag, {})[int(c[1])] = float(c[i])
    wrong = []
    compared = 0
    for tag, series in want.items():
        have = got.get(tag, {})
        if sorted(have) != sorted(series):
            wrong.append(f"{tag}: steps {len(have)} against {len(series)}")
            continue
        for step, v in series.items():
            compared += 1
            if np.float32(v) != np.float32(have[step]):
                wrong.append(f"{tag} step {step}: {have[step]} against {v}")
                break
    return {"job": job, "scalars_compared": compared, "tags": sorted(got), "wrong": wrong[:10],
            "ok": compared > 0 and not wrong}


def gpu_vs_cpu(work, job):
    from safetensors.numpy import load_file
    a = load_file(os.path.join(work, f"{job}_cuda.safetensors"))
    b = load_file(os.path.join(work, f"{job}_cpu.safetensors"))
    num = max(float(np.max(np.abs(a[k] - b[k]))) for k in b)
    den = max(float(np.max(np.abs(b[k]))) for k in b)
    return {"job": job, "max_rel_diff": num / den}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shardlab", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--json", required=True)
    a = ap.parse_args()
    doc = {"safetensors": [], "tensorboard": [], "gpu_vs_cpu": []}
    ok = True
    for job in ("fashion_mlp", "chars_gpt"):
        for key, fn in (("safetensors", lambda: check_safetensors(a.work, job)),
                        ("tensorboard", lambda: check_tensorboard(a.shardlab, a.work, job)),
                        ("gpu_vs_cpu", lambda: gpu_vs_cpu(a.work, job))):
            try:
                r = fn()
            except Exception as e:  # one line per failure, the check named
                r = {"job": job, "ok": False, "why": f"{type(e).__name__}: {e}"}
            doc[key].append(r)
            ok = ok and r.get("ok", True)
            print(key, json.dumps(r))
    doc["ok"] = ok
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
    print("ecosystem:", "OK" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
