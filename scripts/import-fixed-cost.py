#!/usr/bin/env python3
"""A small import's fixed cost against babeltrace2 (BENCHMARKS.md, "Import — binary Linux captures").

Alternates three readers invocation by invocation: `babeltrace2 INPUT > /dev/null`, and
`BEFORE import INPUT --format ctf` and `AFTER import ...` (two socscope binaries, e.g. the build before a
change and after it). A run prints, per reader, the median over REPS invocations of the CPU time (user +
system of the child and its threads, from wait4) and of the wall time (fork to wait4, no perf in the way).
CASE `fresh`: each import goes into a new directory (a new catalog); `existing`: one seeding import, then
every import adds a trace to that catalog.

Usage: scripts/import-fixed-cost.py RUNS REPS fresh|existing BEFORE AFTER CTF_DIR
"""
import os, sys, time, shutil, statistics as st, subprocess
if len(sys.argv) != 7 or sys.argv[3] not in ("fresh", "existing"):
    sys.exit(__doc__.strip().splitlines()[-1])
runs, reps, case, before, after, inp = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
base = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"socscope-import-fixed-cost-{case}")
def run(cmd):
    t0 = time.perf_counter()
    pid = os.fork()
    if pid == 0:
        fd = os.open("/dev/null", os.O_WRONLY); os.dup2(fd, 1); os.dup2(fd, 2)
        os.execv(cmd[0], cmd)
    _, status, ru = os.wait4(pid, 0)
    wall = time.perf_counter() - t0
    if status != 0: sys.exit(f"failed: {cmd}")
    return (ru.ru_utime + ru.ru_stime) * 1e3, wall * 1e3
bt = shutil.which("babeltrace2")
if bt is None:
    sys.exit("import-fixed-cost: babeltrace2 is not installed (apt-get install babeltrace2)")
n = 0
print(f"# {case} {os.path.basename(inp)} {time.strftime('%H:%M:%S')} load {open('/proc/loadavg').read().strip()}")
for r in range(runs):
    vals = {"ref": [], "before": [], "after": []}
    for k in range(reps):
        order = ["ref", "before", "after"]; s = (r + k) % 3; order = order[s:] + order[:s]
        for who in order:
            n += 1
            if who == "ref":
                cmd = [bt, inp]
            else:
                binp = before if who == "before" else after
                d = f"{base}/{who}"
                if case == "fresh":
                    shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
                    cmd = [binp, "import", inp, "--format", "ctf", "--dir", d]
                else:
                    if not os.path.exists(f"{d}/catalog.db"):
                        shutil.rmtree(d, ignore_errors=True); os.makedirs(d)
                        subprocess.run([binp, "import", inp, "--format", "ctf", "--dir", d], check=True, capture_output=True)
                    cmd = [binp, "import", inp, "--format", "ctf", "-o", f"{d}/t{n}.db"]
            vals[who].append(run(cmd))
    m = {w: (st.median([c for c, _ in v]), st.median([x for _, x in v])) for w, v in vals.items()}
    print(f"run{r+1} " + " ".join(f"{w}: cpu {m[w][0]:.2f} wall {m[w][1]:.2f}" for w in m)
          + f" | ref/after cpu {m['ref'][0]/m['after'][0]:.2f}x wall {m['ref'][1]/m['after'][1]:.2f}x"
          + f" | ref/before cpu {m['ref'][0]/m['before'][0]:.2f}x wall {m['ref'][1]/m['before'][1]:.2f}x", flush=True)
print(f"# end {time.strftime('%H:%M:%S')} load {open('/proc/loadavg').read().strip()}")
shutil.rmtree(base, ignore_errors=True)
