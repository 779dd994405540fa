#!/usr/bin/env python3
# Disk full at many fill points (issue 27, row 1 and its numbers). Each run: a tmpfs of 8 MiB (needs root)
# is mounted, a filler file takes a different part of it, `socscope collect` starts with the smallest disk
# reserve it accepts for one connection (--max-connections 1), one board streams in real time until the
# disk is full, then collect gets SIGINT. Checked: the trace reads as a whole (`sql` decodes every event,
# as many as `info` says), nothing is left to repair, no -wal/-shm beside it once `repair` ran; and how much
# board time was decoded and not kept: the board time of the latest record decoded (`session_ended`'s
# `decoded_until_seconds`) minus the trace's last committed time (`lost_board_ms`; the older estimate from
# the records decoded and the board's mean record rate, which is off by the rate's swings within the run,
# is printed beside it as `lost_board_ms_estimate`). Then the filler is deleted and `repair` must fold the
# WAL kept on the full disk into the file.
#
#   scripts/disk-full-runs.py target/release/socscope target/release/socscope-sim [--runs 20] [--rate 20000]
import argparse, json, os, random, signal, subprocess, sys, tempfile, time

ap = argparse.ArgumentParser()
ap.add_argument("socscope")
ap.add_argument("sim")
ap.add_argument("--runs", type=int, default=20)
ap.add_argument("--rate", type=float, default=20000.0)
ap.add_argument("--reserve", type=int, default=196608, help="the smallest collect accepts for 1 connection")
args = ap.parse_args()
rnd = random.Random(27)
results = []
for run in range(args.runs):
    work = tempfile.mkdtemp(prefix="diskfull-")
    mnt = os.path.join(work, "disk")
    os.mkdir(mnt)
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt], check=True)
    try:
        filler = rnd.randrange(2 << 20, 7 << 20)
        with open(os.path.join(mnt, "filler"), "wb") as f:
            f.write(b"\x07" * filler)
        col = subprocess.Popen([args.socscope, "collect", "--listen", "127.0.0.1:0", "--json", "--dir", mnt,
                                "--max-connections", "1", "--disk-reserve", str(args.reserve)],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        addr = json.loads(col.stdout.readline())["address"]
        sim = subprocess.Popen([args.sim, "--connect", f"tcp://{addr}", "--realtime", "--rate", str(args.rate),
                                "--duration", "900", "--seed", str(run + 1), "--json"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        ended = None
        for line in col.stdout:
            n = json.loads(line)
            if n.get("event") == "session_ended":
                ended = n
                break
        time.sleep(rnd.uniform(0.0, 1.0))
        col.send_signal(signal.SIGINT)
        col_out, col_err = col.communicate(timeout=120)
        sim_out, sim_err = sim.communicate(timeout=120)
        summary = json.loads(sim_out) if sim_out.strip() else {}
        trace = ended["file"]
        info = subprocess.run([args.socscope, "info", "--json", trace], capture_output=True, text=True)
        ok_info = info.returncode == 0
        info = json.loads(info.stdout) if ok_info else {}
        sql = subprocess.run([args.socscope, "sql", trace, "SELECT count(*) AS n FROM events", "--json"],
                             capture_output=True, text=True)
        decoded = json.loads(sql.stdout)[0]["n"] if sql.returncode == 0 else None
        rep = subprocess.run([args.socscope, "repair", trace], capture_output=True, text=True)
        # Room again (the filler deleted): repair folds the WAL kept on the full disk into the file.
        os.remove(os.path.join(mnt, "filler"))
        rep2 = subprocess.run([args.socscope, "repair", trace], capture_output=True, text=True)
        alone = not any(os.path.exists(trace + s) for s in ("-wal", "-shm"))
        # In real time the board's records go out at its own measured rate (records sent / wall time).
        records_per_s = summary["events"] / summary["wall_s"] if summary.get("wall_s") else args.rate
        estimated_decoded_s = ended["records"] / records_per_s
        last_decoded_s = ended.get("decoded_until_seconds", estimated_decoded_s)
        committed_s = info.get("t_max_ns", 0) / 1e9
        res = {
            "run": run + 1, "filler_bytes": filler, "collect_exit": col.returncode, "sim_exit": sim.returncode,
            "interrupted": bool(ended.get("interrupted")), "info_ok": ok_info, "events": info.get("events"),
            "decoded": decoded, "whole": ok_info and decoded == info.get("events"),
            "repair_on_full_disk": rep.stdout.strip().splitlines()[0].split(": ", 1)[-1],
            "repair_with_room": rep2.stdout.strip().splitlines()[0].split(": ", 1)[-1],
            "one_file_after_repair_with_room": alone, "sim_records_per_s": round(records_per_s),
            "records_decoded": ended["records"], "lost_board_ms": round((last_decoded_s - committed_s) * 1000, 1),
            "lost_board_ms_estimate": round((estimated_decoded_s - committed_s) * 1000, 1),
            "exact": "decoded_until_seconds" in ended, "interrupted_why": ended.get("interrupted"),
            "sim_refused": (summary.get("link") or {}).get("refused"),
            "load": os.getloadavg()[0],
        }
        results.append(res)
        print(json.dumps(res), flush=True)
    finally:
        subprocess.run(["umount", mnt])
        subprocess.run(["rm", "-rf", work])
whole = sum(r["whole"] for r in results)
lost = [r["lost_board_ms"] for r in results]
print(json.dumps({"runs": len(results), "readable_whole": whole, "lost_board_ms": [min(lost), max(lost)],
                  "sim_told": sum(bool(r["sim_refused"]) for r in results)}))
sys.exit(0 if whole == len(results) else 1)
