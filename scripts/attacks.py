#!/usr/bin/env python3
# Memory under attack while a good board is stored (issue 10: "RSS <= 256 MB under every attack in the table
# while a good board is stored completely"). For each attack of RELIABILITY.md, one run:
#   - `socscope collect` (give the release build) listens on 127.0.0.1 in a fresh directory;
#   - one good board, `socscope-sim --realtime --rate RATE --duration DURATION`, streams to it;
#   - once the good board's session has started, the attack runs against the same collector until the good
#     board has finished;
#   - the collector's peak RSS is read from /proc/PID/status (VmHWM) before it is stopped with SIGTERM;
#   - the good board's trace must hold exactly the board's own counts (records, per type, nothing lost,
#     no frame dropped) and the attack must be counted (its notices or its traces' ingest statistics).
# One JSON line per run, then a summary per attack (min-max over the runs). Exit status 1 if a good board was
# not stored completely or an attack was not counted.
#
#   scripts/attacks.py target/release/socscope target/release/socscope-sim [--runs 3] [--duration 30]
#       [--rate 20000] [--attack idle --attack zstd-bomb ...] [-- COLLECT_ARG...]
#
# Attacks: idle (1 000 idle connections, reopened as the collector closes them), hello-flood (a new connection
# every 0.25 s sending 200 Hellos in 12 KB), zstd-bomb (2 connections x 48 Events frames of 1 MiB that expand
# to 16.7 M records in 6 KB, plus 3 frames declaring 16 MiB), oversized (after a Hello, 100 frames of 2 MiB,
# then 256 MB without a delimiter), long-names (20 Hellos with 100 000-character names full of terminal
# escapes), duplicates (a 10 s capture with 50 of its frames sent twice), same-name (32 more boards named like
# the good one, RATE/4 events/s each), flipped-hello (a capture whose Hello has one bit flipped), all (every
# attack at once; the idle connections 5 s after the others, which they would otherwise keep out at the
# connection limit). Needs the zstd command (zstd-bomb).
import argparse, json, os, random, resource, signal, socket, subprocess, sys, tempfile, threading, time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wireframes import hello, zstd_events  # noqa: E402

ATTACKS = ["idle", "hello-flood", "zstd-bomb", "oversized", "long-names", "duplicates", "same-name",
           "flipped-hello"]


def connect(addr):
    host, port = addr.rsplit(":", 1)
    return socket.create_connection((host, int(port)))


def send_all(addr, data, stop=None, chunk=1 << 20):
    """Sends `data` on a new connection (stops early if the collector closes it); returns bytes sent."""
    sent = 0
    try:
        s = connect(addr)
        for i in range(0, len(data), chunk):
            if stop is not None and stop.is_set():
                break
            s.sendall(data[i:i + chunk])
            sent += min(chunk, len(data) - i)
        s.shutdown(socket.SHUT_WR)
        s.settimeout(30)
        while s.recv(4096):
            pass
        s.close()
    except OSError:
        pass
    return sent


class Run:
    def __init__(self, args, attacks):
        self.args = args
        self.attacks = attacks
        self.work = tempfile.mkdtemp(prefix="attacks-")
        self.dir = os.path.join(self.work, "traces")
        self.notices = []
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.counts = {}  # what the attackers themselves counted
        self.children = []

    def count(self, key, n=1):
        with self.lock:
            self.counts[key] = self.counts.get(key, 0) + n

    def notices_of(self, event):
        with self.lock:
            return [n for n in self.notices if n.get("event") == event]

    def wait_for(self, pred, timeout):
        end = time.time() + timeout
        while time.time() < end:
            with self.lock:
                if any(pred(n) for n in self.notices):
                    return True
            time.sleep(0.05)
        return False

    def capture(self, name, seconds, seed):
        """A sim capture file and its summary."""
        path = os.path.join(self.work, f"{name}.wire")
        out = subprocess.run([self.args.sim, "--duration", str(seconds), "--seed", str(seed), "--board", name,
                              "--rate", str(self.args.rate), "--out", path, "--json"],
                             capture_output=True, text=True, check=True).stdout
        return path, json.loads(out)

    # --- the attacks: each runs until self.stop is set (or it is done) ---

    def idle(self):
        held = []
        while not self.stop.is_set():
            alive = []
            for s in held:
                try:
                    s.setblocking(False)
                    if s.recv(1) == b"":
                        self.count("idle_closed_by_collector")
                        s.close()
                        continue
                except BlockingIOError:
                    pass
                except OSError:
                    self.count("idle_closed_by_collector")
                    s.close()
                    continue
                alive.append(s)
            held = alive
            while len(held) < 1000 and not self.stop.is_set():
                try:
                    held.append(connect(self.addr))
                    self.count("idle_connections_opened")
                except OSError:
                    self.count("idle_connect_failed")
                    break
            self.stop.wait(0.5)
        for s in held:
            s.close()

    def hello_flood(self):
        k = 0
        while not self.stop.is_set():
            data = b"".join(hello("flood", session_id=k * 1000 + i + 1) for i in range(200))
            assert len(data) < 16 * 1024
            threading.Thread(target=send_all, args=(self.addr, data), daemon=True).start()
            self.count("flood_hellos_sent", 200)
            k += 1
            self.stop.wait(0.25)

    def zstd_bomb(self):
        raw_len = (1 << 20) - 1
        n = raw_len // 3
        z = subprocess.run(["zstd", "-19", "-c"], input=bytes([10, 1, 0]) * n, capture_output=True,
                           check=True).stdout
        z16 = subprocess.run(["zstd", "-19", "-c"], input=bytes([10, 1, 0]) * ((16 << 20) // 3),
                             capture_output=True, check=True).stdout

        def one(c):
            data = bytearray(hello("bomb", session_id=900 + c))
            for k in range(48):
                data += zstd_events(k * n, n, raw_len, z)
            for k in range(3):
                data += zstd_events((48 + k) * n, (16 << 20) // 3, (16 << 20) // 3 * 3, z16)
            self.count("bomb_bytes_sent", send_all(self.addr, bytes(data), self.stop))
            self.count("bomb_records_declared", 48 * n)
        ts = [threading.Thread(target=one, args=(c,)) for c in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()

    def oversized(self):
        rnd = random.Random(5)
        big = bytes(rnd.randrange(1, 256) for _ in range(1 << 16)) * 32  # 2 MiB, no zero byte
        try:
            s = connect(self.addr)
            s.sendall(hello("oversized", session_id=800))
            for _ in range(100):
                if self.stop.is_set():
                    break
                s.sendall(big + b"\x00")
                self.count("oversized_frames_sent")
            block = b"\x55" * (1 << 20)
            for _ in range(256):
                if self.stop.is_set():
                    break
                s.sendall(block)
                self.count("undelimited_mib_sent")
            s.close()
        except OSError as e:
            self.count(f"oversized_error {e.__class__.__name__}")

    def long_names(self):
        name = "\x1b]0;pwned\x07\r\n" * 10000
        for i in range(20):
            if self.stop.is_set():
                break
            send_all(self.addr, hello(name, session_id=700 + i))
            self.count("long_names_sent")

    def duplicates(self):
        path, summary = self.capture("dup", 10, 77)
        data = open(path, "rb").read()
        frames = data.split(b"\x00")[:-1]
        frames = [f + b"\x00" for f in frames]
        # Frames 100..149 again after frame 300: records already stored must not be stored twice.
        doubled = frames[:300] + frames[100:150] + frames[300:]
        self.dup_summary = summary
        self.count("dup_frames_repeated", 50)
        send_all(self.addr, b"".join(doubled), self.stop)

    def same_name(self):
        procs = []
        for i in range(32):
            p = subprocess.Popen([self.args.sim, "--connect", f"tcp://{self.addr}", "--realtime", "--duration",
                                  str(max(5.0, self.args.duration - 10)), "--rate", str(self.args.rate / 4),
                                  "--seed", str(100 + i), "--board", "good", "--json"],
                                 stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
            procs.append(p)
            self.children.append(p)
        self.same_summaries = []
        for p in procs:
            out, _ = p.communicate()
            if p.returncode == 0:
                self.same_summaries.append(json.loads(out))
            else:
                self.count("same_name_sim_failed")

    def flipped_hello(self):
        path, summary = self.capture("flip", 5, 78)
        data = bytearray(open(path, "rb").read())
        data[10] ^= 0x10
        self.flip_summary = summary
        send_all(self.addr, bytes(data), self.stop)

    # --- one run ---

    def start(self):
        cmd = [self.args.socscope, "collect", "--listen", "127.0.0.1:0", "--json", "--dir", self.dir] + self.args.extra
        self.err = open(os.path.join(self.work, "collect.stderr"), "w")
        self.col = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err, text=True)
        first = json.loads(self.col.stdout.readline())
        self.addr = first["address"]

        def read():
            for line in self.col.stdout:
                try:
                    n = json.loads(line)
                except ValueError:
                    continue
                with self.lock:
                    self.notices.append(n)
        self.reader = threading.Thread(target=read, daemon=True)
        self.reader.start()

    def peak(self):
        st = {}
        for line in open(f"/proc/{self.col.pid}/status"):
            k, v = line.split(":", 1)
            st[k] = v.strip()
        return int(st["VmHWM"].split()[0]) / 1024, int(st["VmRSS"].split()[0]) / 1024

    def go(self):
        self.start()
        threads_peak = 0
        good = subprocess.Popen([self.args.sim, "--connect", f"tcp://{self.addr}", "--realtime", "--duration",
                                 str(self.args.duration), "--rate", str(self.args.rate), "--seed", "7", "--board",
                                 "good", "--json"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        if not self.wait_for(lambda n: n.get("event") == "session_started" and n.get("board") == "good", 30):
            raise SystemExit("the good board's session did not start")
        good_file = [n["file"] for n in self.notices_of("session_started") if n["board"] == "good"][0]
        t0 = time.time()
        workers = [threading.Thread(target=getattr(self, a.replace("-", "_")), daemon=True) for a in self.attacks]
        # With every attack at once, the idle connections come last: held from the start they take every
        # slot (--max-connections) and the other attackers would only be refused at the door.
        for a, w in zip(self.attacks, workers):
            if a != "idle" or len(self.attacks) == 1:
                w.start()
        if "idle" in self.attacks and len(self.attacks) > 1:
            self.stop.wait(5)
            workers[self.attacks.index("idle")].start()
        while good.poll() is None:
            try:
                threads_peak = max(threads_peak, len(os.listdir(f"/proc/{self.col.pid}/task")))
            except OSError:
                pass
            time.sleep(0.2)
        good_summary = json.loads(good.stdout.read())
        self.good_events = good_summary["events"]
        attack_seconds = time.time() - t0
        self.stop.set()
        for w in workers:
            w.join(timeout=120)
        ok = self.wait_for(lambda n: n.get("event") == "session_ended" and n.get("file") == good_file, 60)
        # Let the attack's own sessions end before the collector is stopped (a bomb takes a while to store).
        time.sleep(2)
        hwm, rss = self.peak()
        load = os.getloadavg()
        self.col.send_signal(signal.SIGTERM)
        try:
            code = self.col.wait(timeout=120)
        except subprocess.TimeoutExpired:
            self.col.kill()
            code = "killed after 120 s"
        for p in self.children:
            if p.poll() is None:
                p.kill()
        self.reader.join(timeout=10)
        problems = []
        ended = [n for n in self.notices_of("session_ended") if n["file"] == good_file]
        if not ok or not ended:
            problems.append("the good board's session did not end")
        else:
            problems += self.check_exact(good_file, ended[0], good_summary, "good board")
        counted = self.attack_counters(problems)
        return {
            "attacks": self.attacks, "peak_rss_mib": round(hwm, 1), "rss_at_end_mib": round(rss, 1),
            "threads_peak": threads_peak, "good_records": good_summary["events"],
            "good_events_per_s": round(good_summary["events"] / good_summary["duration_s"]),
            "attack_seconds": round(attack_seconds, 1), "collect_exit": code,
            "sessions_ended": len(self.notices_of("session_ended")),
            "frame_dropped_notices": len(self.notices_of("frame_dropped")),
            "attacker_counts": self.counts, "counted": counted, "load_avg": [round(x, 2) for x in load],
            "ok": not problems, "problems": problems, "work_dir": self.work,
        }

    def info(self, path):
        out = subprocess.run([self.args.socscope, "info", "--json", path], capture_output=True, text=True)
        return json.loads(out.stdout) if out.returncode == 0 else None

    def check_exact(self, path, ended, summary, who):
        p = []
        info = self.info(path)
        if info is None:
            return [f"{who}: {path} cannot be read"]
        st = info["ingest_stats"]
        want = {"complete": (ended["complete"], True), "records": (st.get("records"), summary["events"]),
                "board_records": (st.get("board_records"), summary["events"]),
                "board_dropped": (st.get("board_dropped"), 0), "sim_dropped": (summary["dropped"], 0),
                "records_lost_in_transit": (st.get("records_lost_in_transit"), 0),
                "frames_dropped": (st.get("frames_dropped"), 0), "duplicate_records": (st.get("duplicate_records"), 0)}
        for k, (got, exp) in want.items():
            if got != exp:
                p.append(f"{who}: {k} = {got}, expected {exp}")
        per_type = sum(v for k, v in st.items() if k.startswith("records."))
        if per_type != summary["events"]:
            p.append(f"{who}: records per type add up to {per_type}, the board sent {summary['events']}")
        return p

    def attack_counters(self, problems):
        """What the collector counted of each attack; a problem if it counted nothing."""
        c = {}
        dropped = [n["message"] for n in self.notices_of("frame_dropped")]
        ended = self.notices_of("session_ended")

        def stats_of(board_prefix):
            out = []
            for n in ended:
                if n["board"].startswith(board_prefix):
                    i = self.info(n["file"])
                    if i:
                        out.append(i["ingest_stats"])
            return out
        for a in self.attacks:
            if a == "idle":
                c["connections_refused"] = sum(m.startswith("connection refused") for m in dropped)
                c["closed_no_session"] = sum(m.startswith("connection closed: no session") for m in dropped)
                c["closed_idle"] = sum(m.startswith("connection closed: idle") or "idle" in m for m in dropped)
                c["refused_so_far_last"] = next((m for m in reversed(dropped) if "refused so far" in m
                                                 and m.startswith("connection refused")), None)
                n = c["connections_refused"] + c["closed_no_session"]
            elif a == "hello-flood":
                c["flood_traces"] = sum(n["board"] == "flood" for n in ended)
                c["hellos_refused_said"] = sum(m.startswith("Hello refused") for m in dropped)
                n = c["hellos_refused_said"]
            elif a == "zstd-bomb":
                s = stats_of("bomb")
                c["bomb_records_stored"] = sum(x.get("records", 0) for x in s)
                c["bomb_frames_dropped_decompress"] = sum(x.get("frames_dropped.decompress", 0) for x in s)
                n = c["bomb_frames_dropped_decompress"]
            elif a == "oversized":
                s = stats_of("oversized")
                c["oversized_frames_dropped"] = sum(x.get("frames_dropped", 0) for x in s)
                c["oversized_bytes_dropped"] = sum(x.get("bytes_dropped", 0) for x in s)
                c["oversized_drop_keys"] = sorted({k for x in s for k in x if k.startswith("frames_dropped.")})
                n = c["oversized_frames_dropped"]
            elif a == "long-names":
                s = stats_of("\x1b]0;pwned")
                c["names_truncated"] = sum(x.get("names_truncated", 0) for x in s)
                c["longest_name_kept"] = max((len(x["board"]) for x in ended if x["board"].startswith("\x1b]0;")),
                                             default=0)
                n = c["names_truncated"]
            elif a == "duplicates":
                s = stats_of("dup")
                c["duplicate_records"] = sum(x.get("duplicate_records", 0) for x in s)
                c["dup_records_stored"] = sum(x.get("records", 0) for x in s)
                exp = getattr(self, "dup_summary", {}).get("events")
                if c["dup_records_stored"] != exp:
                    problems.append(f"duplicates: {c['dup_records_stored']} records stored, the capture has {exp}")
                n = c["duplicate_records"]
            elif a == "same-name":
                goods = [x for x in ended if x["board"] == "good"]
                c["traces_named_good"] = len(goods)
                c["distinct_files"] = len({x["file"] for x in goods})
                sums = getattr(self, "same_summaries", [])
                c["same_name_records"] = sum(x["records"] for x in goods)
                # The good board's own trace is checked exactly above; the 32 others add up to their boards.
                c["same_name_records_sent"] = sum(x["events"] for x in sums) + self.good_events
                if c["same_name_records"] != c["same_name_records_sent"]:
                    problems.append(f"same-name: {c['same_name_records']} records stored, "
                                    f"{c['same_name_records_sent']} sent")
                incomplete = [x for x in goods if not x["complete"] or x["lost_in_transit"] or x["lost_on_board"]]
                c["incomplete"] = len(incomplete)
                if len(goods) != 33 or c["distinct_files"] != 33 or incomplete:
                    problems.append(f"same-name: {len(goods)} traces, {c['distinct_files']} files, "
                                    f"{len(incomplete)} incomplete (expected 33, 33, 0)")
                n = len(goods)
            elif a == "flipped-hello":
                s = stats_of("flip")
                c["flip_frames_dropped_before_hello"] = sum(x.get("frames_dropped_before_hello", 0) for x in s)
                c["flip_records_stored"] = sum(x.get("records", 0) for x in s)
                c["flip_records_sent"] = getattr(self, "flip_summary", {}).get("events")
                n = c["flip_frames_dropped_before_hello"]
            if not n:
                problems.append(f"{a}: the collector counted nothing of it")
        return c


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("socscope")
    ap.add_argument("sim")
    ap.add_argument("--attack", action="append", choices=ATTACKS + ["all"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--duration", type=float, default=30.0)
    ap.add_argument("--rate", type=float, default=20000.0)
    ap.add_argument("--keep", action="store_true", help="keep the trace directories")
    ap.add_argument("extra", nargs="*", help="more `socscope collect` arguments (after --)")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    plan = args.attack or ATTACKS
    results = {}
    failed = False
    for attack in plan:
        attacks = ATTACKS if attack == "all" else [attack]
        for r in range(args.runs):
            run = Run(args, attacks)
            res = run.go()
            res["attack"] = attack
            res["run"] = r + 1
            print(json.dumps(res), flush=True)
            results.setdefault(attack, []).append(res)
            failed |= not res["ok"]
            if not args.keep:
                subprocess.run(["rm", "-rf", run.work])
    for attack, rs in results.items():
        peaks = [x["peak_rss_mib"] for x in rs]
        loads = [x["load_avg"][0] for x in rs]
        print(json.dumps({"summary": attack, "runs": len(rs), "peak_rss_mib": [min(peaks), max(peaks)],
                          "good_board_complete": sum(x["ok"] for x in rs), "load_avg_1min": [min(loads), max(loads)]}))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
