//! `socscope-sim`: the simulated set-top box as a program.

use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, anyhow};
use clap::Parser;
use socscope_sim::transport::{self, WriterTransport};
use socscope_sim::{Scenario, SimConfig, SimSummary};

const EXAMPLES: &str = "\
Examples:
  socscope-sim --duration 10 --out x.wire --json
  socscope-sim --connect tcp://127.0.0.1:7000 --realtime --zap-every 5
  socscope-sim --serial /dev/pts/3:921600 --duration 2
  socscope-sim --duration 30 --cpu-stress 10:5 --io-stress 20:5 --out stress.wire
  socscope-sim --duration 10 --rate 5000000 --out /tmp/bench.wire";

/// A simulated set-top box running the real socscope agent: a decoding pipeline, a 50 Hz vsync
/// callback, timer and network interrupts, with optional zapping and CPU or I/O stress.
/// Deterministic from --seed.
#[derive(Debug, Parser)]
#[command(name = "socscope-sim", version, after_help = EXAMPLES, allow_negative_numbers = true)]
#[command(group = clap::ArgGroup::new("output").required(true).args(["connect", "serial", "out"]))]
struct Cli {
    /// Seed of every random choice; the same seed gives the same stream.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Simulated seconds to run.
    #[arg(long, default_value_t = 10.0, value_name = "SECONDS")]
    duration: f64,
    /// CPUs of the board.
    #[arg(long, default_value_t = 2, value_name = "N")]
    cpus: u16,
    /// Events per simulated second (about 20000 is a real box; up to millions for benchmarks).
    #[arg(long, default_value_t = socscope_sim::BASE_RATE, value_name = "EVENTS_PER_S")]
    rate: f64,
    /// Zap to another channel every SECONDS.
    #[arg(long, value_name = "SECONDS")]
    zap_every: Option<f64>,
    /// A CPU-busy task preempts the pipeline from AT for DURATION seconds (repeatable).
    #[arg(long, value_name = "AT:DURATION")]
    cpu_stress: Vec<Scenario>,
    /// A dd-like writer and the journal thread delay the vsync callback from AT for DURATION seconds
    /// (repeatable).
    #[arg(long, value_name = "AT:DURATION")]
    io_stress: Vec<Scenario>,
    /// Pace simulated time to the wall clock.
    #[arg(long)]
    realtime: bool,
    /// Board name announced to the collector.
    #[arg(long, default_value = "sim-stb")]
    board: String,
    /// The shared secret a collector started with --token requires, sent in Hello.
    #[arg(long, value_name = "SECRET")]
    token: Option<String>,
    /// The same, read from FILE (its first line), so that it does not show in the process list.
    #[arg(long, value_name = "FILE", conflicts_with = "token")]
    token_file: Option<PathBuf>,
    /// Stream to a collector listening at tcp://HOST:PORT.
    #[arg(long, value_name = "tcp://HOST:PORT")]
    connect: Option<String>,
    /// Compress event batches with zstd (TCP only).
    #[arg(long)]
    zstd: bool,
    /// Stream over a serial device or pty, at BAUD (default 115200).
    #[arg(long, value_name = "PATH[:BAUD]")]
    serial: Option<String>,
    /// Write the raw stream to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print the summary as one JSON object.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            // Clap's message up to its usage section, on one line.
            let text = e.to_string();
            let message: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            eprintln!(
                "socscope-sim: {} (see --help)",
                message.join(" ").trim_start_matches("error: ")
            );
            return ExitCode::from(2);
        }
    };
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("socscope-sim: {}", chain.join(": ").replace('\n', " "));
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    let token = match (&cli.token, &cli.token_file) {
        (Some(t), _) => t.clone(),
        (None, Some(path)) => std::fs::read_to_string(path)
            .with_context(|| format!("cannot read the token file {}", path.display()))?
            .lines()
            .next()
            .unwrap_or_default()
            .trim()
            .to_string(),
        (None, None) => String::new(),
    };
    let config = SimConfig {
        seed: cli.seed,
        duration_s: cli.duration,
        cpus: cli.cpus,
        rate: cli.rate,
        zap_every_s: cli.zap_every,
        cpu_stress: cli.cpu_stress.clone(),
        io_stress: cli.io_stress.clone(),
        realtime: cli.realtime,
        board: Box::leak(cli.board.clone().into_boxed_str()),
        session_id: 0,
        token: Box::leak(token.into_boxed_str()),
    };
    config.validate()?;
    if cli.zstd && cli.connect.is_none() {
        return Err(anyhow!(
            "--zstd is for --connect only: the wire allows compression on TCP"
        ));
    }
    // Over TCP the collector may answer (a Refusal before it closes the link): watched while streaming.
    let mut link: Option<(std::net::TcpStream, std::sync::Arc<transport::LinkWatch>)> = None;
    let (writer, target): (Box<dyn Write + Send>, String) = if let Some(url) = &cli.connect {
        let address = transport::parse_tcp_url(url)
            .ok_or_else(|| anyhow!("bad address {url:?}: expected tcp://HOST:PORT"))?;
        let stream = transport::tcp(address).with_context(|| format!("cannot connect to {url}"))?;
        let socket = stream
            .get_ref()
            .try_clone()
            .with_context(|| format!("cannot watch the link to {url}"))?;
        let watch = transport::LinkWatch::start(&socket)
            .with_context(|| format!("cannot watch the link to {url}"))?;
        link = Some((socket, watch.clone()));
        (
            Box::new(transport::Watched::new(stream, watch)),
            url.clone(),
        )
    } else if let Some(spec) = &cli.serial {
        let (path, baud) = transport::parse_serial(spec)
            .ok_or_else(|| anyhow!("bad serial port {spec:?}: expected PATH[:BAUD]"))?;
        let port = transport::serial(path, baud)
            .with_context(|| format!("cannot open serial port {path}"))?;
        (Box::new(port), path.to_owned())
    } else if let Some(path) = &cli.out {
        if path.as_os_str() == "-" {
            (
                Box::new(std::io::BufWriter::new(std::io::stdout())),
                "standard output".to_owned(),
            )
        } else {
            let file = transport::file(path)
                .with_context(|| format!("cannot create {}", path.display()))?;
            (Box::new(file.into_inner()), path.display().to_string())
        }
    } else {
        return Err(anyhow!("no output: give --connect, --serial or --out"));
    };
    let zstd_level = cli.zstd.then_some(3);
    let result: anyhow::Result<SimSummary> = if config.realtime {
        // A live board cannot slow time down: a slow link fills the rings and drops records.
        let mut t = transport::QueuedTransport::spawn(writer, 256 << 10);
        if let Some(level) = zstd_level {
            t = t.with_zstd(level).context("cannot start zstd")?;
        }
        // On a terminal a live run shows how far it is (it may last minutes); never under --json.
        let result = if !cli.json && std::io::stderr().is_terminal() {
            let mut line = |p: &socscope_sim::SimProgress| {
                eprint!("\r\x1b[K{p}");
            };
            let r = socscope_sim::run_with_progress(
                &config,
                &mut t,
                std::time::Duration::from_millis(500),
                &mut line,
            );
            eprint!("\r\x1b[K");
            r
        } else {
            socscope_sim::run(&config, &mut t)
        };
        let flushed = t.finish();
        match (result, flushed) {
            (Ok(summary), Ok(())) => Ok(summary),
            (Ok(summary), Err(e)) => Err(anyhow::Error::new(e).context(SentSoFar(summary))),
            (Err(e), flushed) => Err(closed(e, flushed.err())),
        }
    } else {
        let mut t = WriterTransport::new(writer);
        if let Some(level) = zstd_level {
            t = t.with_zstd(level).context("cannot start zstd")?;
        }
        simulate(&config, t)
    };
    // What the link says: a refusal, the collector gone, bytes it never acknowledged.
    let link_report = link.as_ref().map(|(socket, watch)| {
        let state = if result.is_err() {
            watch.settle(std::time::Duration::from_secs(2))
        } else {
            watch.state()
        };
        // The last bytes may still be on their way: give TCP a moment to have them acknowledged.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
        let mut unacked = transport::unacknowledged(socket);
        while unacked.is_some_and(|n| n > 0)
            && !state.closed_by_collector
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(20));
            unacked = transport::unacknowledged(socket);
        }
        (state, unacked)
    });
    let (summary, failure) = match result {
        Ok(summary) => (summary, None),
        Err(e) => match e.downcast_ref::<SentSoFar>() {
            Some(SentSoFar(summary)) => (summary.clone(), Some(e)),
            None => return Err(e.context(format!("while streaming to {target}"))),
        },
    };
    // With `--out -` the stream owns standard output, so the summary goes to standard error.
    let to_stdout = cli.out.as_deref().is_none_or(|p| p.as_os_str() != "-");
    let line = if cli.json {
        let mut v = serde_json::to_value(&summary)?;
        if let Some((state, unacked)) = &link_report {
            v["link"] = serde_json::json!({
                "refused": state.refused.as_ref().map(|(reason, message)| serde_json::json!({"reason": reason, "message": message})),
                "closed_by_collector": state.closed_by_collector,
                "bytes_sent": summary.bytes,
                "bytes_unacknowledged": unacked,
            });
        }
        if let Some(e) = &failure {
            v["error"] = serde_json::json!(error_line(e));
        }
        serde_json::to_string(&v)?
    } else {
        let mut text = summary.to_string();
        if let Some((_, Some(unacked))) = &link_report
            && *unacked > 0
        {
            text.push_str(&format!(
                "; {unacked} of the {} bytes sent never acknowledged by the collector",
                summary.bytes
            ));
        }
        text
    };
    if to_stdout {
        writeln!(std::io::stdout(), "{line}")?;
    } else {
        eprintln!("{line}");
    }
    if let Some((state, _)) = &link_report
        && let Some((reason, message)) = &state.refused
    {
        return Err(anyhow!(
            "{target} refused the session ({reason}): {message}; {} records were sent before the refusal came (see the summary)",
            summary.events
        ));
    }
    if let Some(e) = failure {
        return Err(e.context(format!(
            "while streaming to {target} (the summary above is what was sent)"
        )));
    }
    Ok(())
}

/// The summary of what was sent before the link failed, carried by the error.
#[derive(Debug)]
struct SentSoFar(SimSummary);

impl std::fmt::Display for SentSoFar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the link failed after {} records ({} bytes)",
            self.0.events, self.0.bytes
        )
    }
}

/// The error of a run that stopped early, with what it had sent.
fn closed(e: socscope_sim::SimError, io: Option<std::io::Error>) -> anyhow::Error {
    match e {
        socscope_sim::SimError::Closed { summary, .. } => {
            let base = match io {
                Some(io) => anyhow::Error::new(io),
                None => anyhow!("the link was closed"),
            };
            base.context(SentSoFar(*summary))
        }
        other => anyhow::Error::new(other),
    }
}

fn error_line(e: &anyhow::Error) -> String {
    e.chain()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(": ")
}

fn simulate<W: Write>(config: &SimConfig, mut t: WriterTransport<W>) -> anyhow::Result<SimSummary> {
    let result = socscope_sim::run(config, &mut t);
    let io = t.finish().err();
    match result {
        Ok(summary) => match io {
            None => Ok(summary),
            Some(e) => Err(anyhow::Error::new(e).context(SentSoFar(summary))),
        },
        Err(e) => Err(closed(e, io)),
    }
}
