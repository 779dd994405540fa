#!/usr/bin/env python3
# kill -9 loss at saturation (issue 10, row 7). Usage: scripts/kill9-loss.py SOCSCOPE SOCSCOPE_SIM [WARMUP_S [COLLECT_ARG...]]
# (release binaries). The proxy is Python: it, not the collector, sets the pace ("saturation" = its rate).
# kill -9 loss at saturation: a board streams as fast as it can through a recording
# proxy into `socscope collect`; after WARMUP seconds the collector is killed with SIGKILL. What the board
# had sent and TCP had acknowledged = bytes forwarded minus the proxy socket's unacknowledged queue
# (TIOCOUTQ) at the kill. The collector's directory is then repaired; the same acknowledged bytes are
# replayed into a fresh directory; loss = events of the replay - events stored, in ms at the run's rate.
import fcntl, json, os, signal, socket, struct, subprocess, sys, tempfile, termios, threading, time
SOCSCOPE, SIM = sys.argv[1], sys.argv[2]
WARMUP = float(sys.argv[3]) if len(sys.argv) > 3 else 3.0
EXTRA = sys.argv[4:]  # e.g. --commit-interval 250ms
work = tempfile.mkdtemp(prefix="k9-")
d = os.path.join(work, "d")
col = subprocess.Popen([SOCSCOPE, "collect", "--listen", "127.0.0.1:0", "--json", "--dir", d] + EXTRA,
                       stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
addr = json.loads(col.stdout.readline())["address"]
host, port = addr.rsplit(":", 1)
lst = socket.socket(); lst.bind(("127.0.0.1", 0)); lst.listen(1)
sim = subprocess.Popen([SIM, "--connect", f"tcp://127.0.0.1:{lst.getsockname()[1]}", "--duration", "3600", "--seed", "1"],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
board, _ = lst.accept()
up = socket.create_connection((host, int(port)))
seen = bytearray(); lock = threading.Lock(); stop = threading.Event()
t0 = time.time()
def pump():
    while not stop.is_set():
        data = board.recv(1 << 20)
        if not data: break
        with lock:
            if stop.is_set(): break
            try: up.sendall(data)
            except OSError: break
            seen.extend(data)
th = threading.Thread(target=pump, daemon=True); th.start()
time.sleep(WARMUP)
with lock:
    stop.set()
    outq = struct.unpack("i", fcntl.ioctl(up.fileno(), termios.TIOCOUTQ, b"\0\0\0\0"))[0]
    os.kill(col.pid, signal.SIGKILL)
    t_kill = time.time()
    acked = len(seen) - outq
col.wait(); sim.kill(); sim.wait()
prefix = os.path.join(work, "acked.wire")
open(prefix, "wb").write(seen[:acked])
trace = [f for f in os.listdir(d) if f.endswith(".db") and f != "catalog.db"][0]
rep = subprocess.run([SOCSCOPE, "repair", "--json", os.path.join(d, trace)], capture_output=True, text=True, check=True)
info = json.loads(subprocess.run([SOCSCOPE, "info", "--json", os.path.join(d, trace)], capture_output=True, text=True, check=True).stdout)
out = subprocess.run([SOCSCOPE, "collect", "--no-listen", "--json", "--replay", prefix, "--dir", os.path.join(work, "r")],
                     capture_output=True, text=True, check=True).stdout
ended = [json.loads(l) for l in out.splitlines() if '"session_ended"' in l][0]
elapsed = t_kill - t0
rate = ended["events"] / elapsed
lost = ended["events"] - info["events"]
print(json.dumps({"warmup_s": WARMUP, "collect_args": EXTRA, "bytes_acked": acked, "unacked_at_kill": outq,
                  "events_acked": ended["events"], "events_stored": info["events"], "events_lost": lost,
                  "events_per_s": round(rate), "loss_ms": round(lost / rate * 1000, 1)}))
