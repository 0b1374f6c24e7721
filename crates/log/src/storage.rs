//! The write path's view of the file system, behind a trait so tests can inject faults (short
//! writes, a full disk, `fsync` failures) where the real system would hit them.
//!
//! Reads (recovery) use `std::fs` directly: their faults are damage in the bytes, which tests
//! make by editing files.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// A file being appended to.
pub trait AppendFile: Send {
    /// Writes all of `buf` at the end, or fails (possibly after writing a prefix).
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// `fdatasync`: everything written so far is on disk when this returns `Ok`.
    fn sync_data(&mut self) -> io::Result<()>;
}

/// Creates files and makes directory entries durable.
pub trait Storage: Send + Sync + std::fmt::Debug + 'static {
    /// Creates `path` (which must not exist) for appending.
    fn create(&self, path: &Path) -> io::Result<Box<dyn AppendFile>>;
    /// As `create`, for writes that are whole 4 KiB blocks from 4 KiB-aligned memory at
    /// aligned offsets: the real file system bypasses the page cache (`O_DIRECT`) where it
    /// can, which saves the kernel's copy of every byte.
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        self.create(path)
    }
    /// Opens an existing `path` for appending at its end.
    fn append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>>;
    /// `fsync`s a directory, so entries created or renamed in it survive a crash.
    fn sync_dir(&self, dir: &Path) -> io::Result<()>;
}

/// The real file system.
#[derive(Clone, Copy, Debug, Default)]
pub struct OsStorage;

struct OsFile(File);

impl AppendFile for OsFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        self.0.write_all(buf)
    }
    fn sync_data(&mut self) -> io::Result<()> {
        self.0.sync_data()
    }
}

impl Storage for OsStorage {
    fn create_direct(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        use std::os::unix::fs::OpenOptionsExt;
        let direct = OpenOptions::new()
            .write(true)
            .create_new(true)
            .custom_flags(libc::O_DIRECT)
            .open(path);
        match direct {
            Ok(f) => Ok(Box::new(OsFile(f))),
            // A file system without direct I/O (tmpfs): the page cache it is.
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
                let _ = std::fs::remove_file(path);
                self.create(path)
            }
            Err(e) => Err(e),
        }
    }

    fn create(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        let f = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(OsFile(f)))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        Ok(Box::new(OsFile(
            OpenOptions::new().append(true).open(path)?,
        )))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        File::open(dir)?.sync_all()
    }
}

/// Faults to inject, shared by every file a [`FaultyStorage`] makes. `u64::MAX` = never.
#[derive(Debug)]
pub struct FaultPlan {
    /// Bytes that may still be written; a write crossing it writes the part that fits, then
    /// fails with `ENOSPC` (a full disk), as do all later writes.
    pub bytes_left: AtomicU64,
    /// `sync_data` calls that still succeed; the next one fails with `EIO`.
    pub syncs_left: AtomicU64,
    /// While set, `sync_data` waits (a slow disk: commits stay undurable meanwhile).
    pub syncs_held: AtomicBool,
}

impl FaultPlan {
    /// Holds every `sync_data` back until the returned guard drops (however the test that
    /// took it ends: dropping a database flushes its log, which would wait for ever).
    pub fn hold_syncs(&self) -> SyncsHeld<'_> {
        self.syncs_held.store(true, Ordering::SeqCst);
        SyncsHeld(self)
    }
}

/// Syncs held back by [`FaultPlan::hold_syncs`]; dropping it lets them through.
pub struct SyncsHeld<'p>(&'p FaultPlan);

impl Drop for SyncsHeld<'_> {
    fn drop(&mut self) {
        self.0.syncs_held.store(false, Ordering::SeqCst);
    }
}

impl Default for FaultPlan {
    fn default() -> Self {
        FaultPlan {
            bytes_left: AtomicU64::new(u64::MAX),
            syncs_left: AtomicU64::new(u64::MAX),
            syncs_held: AtomicBool::new(false),
        }
    }
}

/// [`OsStorage`] with the faults of a [`FaultPlan`] (for tests).
#[derive(Clone, Debug, Default)]
pub struct FaultyStorage {
    pub plan: Arc<FaultPlan>,
}

struct FaultyFile {
    inner: OsFile,
    plan: Arc<FaultPlan>,
}

impl AppendFile for FaultyFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let left = self.plan.bytes_left.load(Ordering::SeqCst);
        if left == u64::MAX {
            return self.inner.write_all(buf);
        }
        let n = (buf.len() as u64).min(left);
        self.plan.bytes_left.fetch_sub(n, Ordering::SeqCst);
        self.inner.write_all(&buf[..n as usize])?;
        if n < buf.len() as u64 {
            return Err(io::Error::from_raw_os_error(libc::ENOSPC));
        }
        Ok(())
    }
    fn sync_data(&mut self) -> io::Result<()> {
        while self.plan.syncs_held.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        let left = self.plan.syncs_left.load(Ordering::SeqCst);
        if left != u64::MAX {
            if left == 0 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            self.plan.syncs_left.fetch_sub(1, Ordering::SeqCst);
        }
        self.inner.sync_data()
    }
}

impl Storage for FaultyStorage {
    fn create(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        let f = OpenOptions::new().write(true).create_new(true).open(path)?;
        Ok(Box::new(FaultyFile {
            inner: OsFile(f),
            plan: self.plan.clone(),
        }))
    }
    fn append(&self, path: &Path) -> io::Result<Box<dyn AppendFile>> {
        Ok(Box::new(FaultyFile {
            inner: OsFile(OpenOptions::new().append(true).open(path)?),
            plan: self.plan.clone(),
        }))
    }
    fn sync_dir(&self, dir: &Path) -> io::Result<()> {
        OsStorage.sync_dir(dir)
    }
}
