//! Server processes started by the tests (a real binary, its stderr
//! collected), and the file size limit the fault tests use as a full disk.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

/// A server process started by a test, with its stderr collected.
pub struct Logged {
    pub child: Child,
    /// The address it printed.
    pub addr: String,
    /// Everything it wrote to stderr so far.
    pub stderr: std::sync::Arc<std::sync::Mutex<String>>,
}

impl Logged {
    /// Lines of stderr that contain `needle`.
    pub fn stderr_lines(&self, needle: &str) -> Vec<String> {
        self.stderr
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains(needle))
            .map(str::to_string)
            .collect()
    }

    pub fn kill(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The server binary with a free port, tenant `demo` and `--data data`,
/// plus `extra` flags.
pub fn server_command(data: &std::path::Path, extra: &[&str]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_taskwire-server"));
    cmd.args(["--listen", "127.0.0.1:0", "--token", "demo=demo"])
        .arg("--data")
        .arg(data)
        .args(extra);
    cmd
}

/// Starts `cmd` (the server binary, or a wrapper that execs it) with
/// stdout and stderr piped; returns once it prints its address.
pub fn spawn_logged(mut cmd: Command) -> Logged {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn server");
    let stderr = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let mut err = BufReader::new(child.stderr.take().expect("piped stderr"));
    let sink = std::sync::Arc::clone(&stderr);
    std::thread::spawn(move || {
        let mut line = String::new();
        while err.read_line(&mut line).is_ok_and(|n| n > 0) {
            eprint!("server: {line}");
            sink.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    let addr = listening_addr(&mut child);
    assert!(!addr.is_empty(), "the server did not start: {stderr:?}");
    Logged {
        child,
        addr,
        stderr,
    }
}

/// The address a server started with piped stdout prints on its first
/// line; the rest of stdout is drained, so the server never writes to a
/// closed pipe.
pub fn listening_addr(child: &mut Child) -> String {
    let mut out = BufReader::new(child.stdout.take().expect("piped stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("the listening line");
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    line.trim()
        .rsplit("http://")
        .next()
        .expect("listening line")
        .to_string()
}

/// Lifts the file size limit of a server started under [`limited`]: the
/// disk has space again, for the same process.
pub fn lift_file_limit(server: &Logged) {
    let pid = server.child.id().to_string();
    let raised = Command::new("prlimit")
        .args(["--pid", &pid, "--fsize=unlimited"])
        .status()
        .expect("prlimit (util-linux)");
    assert!(raised.success());
}

/// The server under a file size limit (`ulimit -f`, which holds for root
/// too), with `extra` flags: past it, every write of the WAL or the
/// database fails with `EFBIG`, as on a full disk. `SIGXFSZ` is ignored so
/// the write fails instead of killing the process; `prlimit` on the
/// running process lifts the limit (space again).
pub fn limited(dir: &std::path::Path, kib: u64, extra: &[&str]) -> Command {
    let server = server_command(dir, extra);
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("trap '' XFSZ; ulimit -S -f \"$1\"; shift; exec \"$@\"")
        .arg("bash")
        .arg(kib.to_string())
        .arg(server.get_program())
        .args(server.get_args());
    cmd
}
