#!/usr/bin/env python3
# The idle-slot attacker of issue 27, row 7, against five good boards. A release `socscope collect` listens
# on 127.0.0.1 (default limits); a peer keeps IDLE (70) connections open that send nothing, reopening
# each one the collector closes; meanwhile five boards stream in real time (RATE events/s each) for
# DURATION seconds. Checked: each board's trace holds exactly what it sent. Measured: the collector's peak
# RSS (VmHWM) and threads, and how many idle connections the attacker opened.
#
#   scripts/idle-slot-attack.py target/release/socscope target/release/socscope-sim [--duration 60]
import argparse, json, os, signal, socket, subprocess, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("socscope")
ap.add_argument("sim")
ap.add_argument("--duration", type=float, default=60.0)
ap.add_argument("--rate", type=float, default=20000.0)
ap.add_argument("--idle", type=int, default=70)
ap.add_argument("--boards", type=int, default=5)
args = ap.parse_args()
work = subprocess.run(["mktemp", "-d"], capture_output=True, text=True).stdout.strip()
col = subprocess.Popen([args.socscope, "collect", "--listen", "127.0.0.1:0", "--json", "--dir", work],
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
addr = json.loads(col.stdout.readline())["address"]
host, port = addr.rsplit(":", 1)
notices = []
threading.Thread(target=lambda: [notices.append(json.loads(l)) for l in col.stdout], daemon=True).start()
stop = threading.Event()
opened = [0]


def attacker():
    held = []
    while not stop.is_set():
        alive = []
        for s in held:
            try:
                s.setblocking(False)
                if s.recv(1) == b"":
                    s.close()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                s.close()
                continue
            alive.append(s)
        held = alive
        while len(held) < args.idle and not stop.is_set():
            try:
                held.append(socket.create_connection((host, int(port))))
                opened[0] += 1
            except OSError:
                break
        stop.wait(0.05)
    for s in held:
        s.close()


att = threading.Thread(target=attacker)
att.start()
time.sleep(2)
boards = [subprocess.Popen([args.sim, "--connect", f"tcp://{addr}", "--realtime", "--rate", str(args.rate),
                            "--duration", str(args.duration), "--seed", str(50 + i), "--board", f"good{i}",
                            "--json"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
          for i in range(args.boards)]
threads_peak = 0
while any(b.poll() is None for b in boards):
    try:
        threads_peak = max(threads_peak, len(os.listdir(f"/proc/{col.pid}/task")))
    except OSError:
        pass
    time.sleep(0.2)
outs = [b.communicate() for b in boards]
time.sleep(2)
status = dict(l.split(":", 1) for l in open(f"/proc/{col.pid}/status"))
hwm = int(status["VmHWM"].split()[0]) / 1024
stop.set()
att.join()
col.send_signal(signal.SIGTERM)
col.wait(timeout=120)
stored = 0
per_board = []
for i, (out, err) in enumerate(outs):
    try:
        sent = json.loads(out)
    except ValueError:
        per_board.append({"board": f"good{i}", "error": err.strip()})
        continue
    ended = [n for n in notices if n.get("event") == "session_ended" and n.get("board") == f"good{i}"]
    info = None
    if ended:
        r = subprocess.run([args.socscope, "info", "--json", ended[0]["file"]], capture_output=True, text=True)
        info = json.loads(r.stdout) if r.returncode == 0 else None
    st = (info or {}).get("ingest_stats", {})
    exact = bool(ended) and ended[0]["complete"] and st.get("records") == sent["events"] \
        and st.get("records_lost_in_transit") == 0 and sent["dropped"] == 0
    stored += exact
    per_board.append({"board": f"good{i}", "sent": sent["events"], "stored_records": st.get("records"),
                      "exact": exact})
evicted = sum(1 for n in notices if n.get("event") == "frame_dropped"
              and n.get("message", "").startswith("connection closed: no session after"))
print(json.dumps({"boards_stored_exactly": stored, "boards": args.boards, "duration_s": args.duration,
                  "idle_connections_opened": opened[0], "evicted_said": evicted,
                  "collector_peak_rss_mib": round(hwm, 1), "collector_threads_peak": threads_peak,
                  "load": os.getloadavg(), "per_board": per_board}))
subprocess.run(["rm", "-rf", work])
