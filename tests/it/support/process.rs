//! A program under test as a child process. Its stdout and stderr go to a log file, and when the
//! test fails (the process is dropped while the thread panics) the log is printed, so that a
//! failure shows what the program said. Restarts append to the same log.
//!
//! It uses only std, tokio and tempfile: the emulator's tests include this file by path.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus};
use std::time::{Duration, Instant};

/// A started program, killed (and its log printed if the test failed) on drop.
pub struct Process {
    name: String,
    command: Command,
    child: Option<Child>,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

impl Process {
    /// Starts `command` as the program `name`.
    pub fn start(name: impl Into<String>, command: Command) -> Process {
        let dir = tempfile::tempdir().expect("a directory for the log");
        let name = name.into();
        let log = dir.path().join("output.log");
        let mut p = Process {
            name,
            command,
            child: None,
            log,
            _dir: dir,
        };
        p.restart();
        p
    }

    /// Starts it again (after [`Process::stop`] or [`Process::kill`]), logging to the same file.
    pub fn restart(&mut self) {
        assert!(self.child.is_none(), "{} is still running", self.name);
        let mut file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .expect("the log file opens");
        let _ = writeln!(file, "==== {} started: {:?}", self.name, self.command);
        let out: File = file.try_clone().expect("the log file is shared");
        let child = self
            .command
            .stdout(out)
            .stderr(file)
            .spawn()
            .unwrap_or_else(|e| panic!("{} does not start: {e}", self.name));
        self.child = Some(child);
    }

    /// Its process id, while it runs.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Everything it wrote so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `kill -9`, then waits for it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Sends SIGTERM, as the kubelet does, without waiting.
    pub fn terminate(&self) {
        if let Some(id) = self.id() {
            let status = Command::new("kill")
                .args(["-TERM", &id.to_string()])
                .status()
                .expect("kill runs");
            assert!(status.success(), "kill -TERM {id} failed");
        }
    }

    /// Waits up to `within` (without blocking the test's runtime) for it to exit on its own;
    /// fails the test with the log if it is still running then.
    pub async fn exited(&mut self, within: Duration) -> ExitStatus {
        let mut child = self.child.take().expect("the program was started");
        let deadline = Instant::now() + within;
        loop {
            if let Some(exit) = child.try_wait().expect("the program can be waited for") {
                return exit;
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                panic!("{} did not exit within {within:?}", self.name);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// A graceful stop: SIGTERM, then waits up to `within` (without blocking the test's runtime)
    /// for the exit; fails the test with the log if it takes longer. None if it was not running.
    pub async fn stop(&mut self, within: Duration) -> Option<ExitStatus> {
        self.terminate();
        let mut child = self.child.take()?;
        let deadline = Instant::now() + within;
        loop {
            if let Some(exit) = child.try_wait().expect("the program can be waited for") {
                return Some(exit);
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                // The log follows: dropping the process while panicking prints it.
                panic!("{} did not stop within {within:?} of SIGTERM", self.name);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
        if std::thread::panicking() {
            eprintln!(
                "---- log of {} ({}) ----\n{}---- end of the log of {} ----",
                self.name,
                self.log.display(),
                self.log(),
                self.name
            );
        }
    }
}
