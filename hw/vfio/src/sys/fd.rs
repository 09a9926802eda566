//! System calls on file descriptors and paths, each a specific safe wrapper.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::path::Path;
use std::time::Duration;

use vfio_ioctls::{VfioContainer, VfioDevice};

/// `_IO(VFIO_TYPE, VFIO_BASE + nr)`: VFIO's ioctls carry no size in their number.
pub(crate) const fn vfio_ioctl(nr: u32) -> libc::Ioctl {
    ((b';' as libc::Ioctl) << 8) | (100 + nr) as libc::Ioctl
}
const VFIO_DEVICE_GET_INFO: libc::Ioctl = vfio_ioctl(7);
const VFIO_DEVICE_RESET: libc::Ioctl = vfio_ioctl(11);
const VFIO_IOMMU_GET_INFO: libc::Ioctl = vfio_ioctl(12);

/// `VFIO_DEVICE_GET_INFO`'s flags.
pub(crate) fn device_flags(dev: &VfioDevice) -> io::Result<u32> {
    // struct vfio_device_info { argsz, flags, num_regions, num_irqs, cap_offset, pad }: u32 each.
    let mut info = [0u32; 6];
    info[0] = std::mem::size_of_val(&info) as u32;
    // SAFETY: the fd is a VFIO device's (a `VfioDevice` only holds one, open while it lives), so
    // the number means VFIO_DEVICE_GET_INFO, which writes at most argsz bytes; `info` is a live,
    // writable, 4-aligned buffer of argsz bytes.
    let r = unsafe { libc::ioctl(dev.as_raw_fd(), VFIO_DEVICE_GET_INFO, info.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(info[1])
}

/// `VFIO_DEVICE_RESET`.
pub(crate) fn device_reset(dev: &VfioDevice) -> io::Result<()> {
    // SAFETY: the fd is a VFIO device's (as above); VFIO_DEVICE_RESET takes no argument and
    // touches no memory of ours.
    if unsafe { libc::ioctl(dev.as_raw_fd(), VFIO_DEVICE_RESET) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `VFIO_IOMMU_GET_INFO` into `buf` (a `struct vfio_iommu_type1_info` with room for its
/// capabilities): argsz is set to the buffer's length, so the kernel writes no more than that.
/// Returns the argsz the kernel answered with (more than the buffer if the caps did not fit).
pub(crate) fn iommu_info(container: &VfioContainer, buf: &mut [u64]) -> io::Result<u32> {
    let bytes = u32::try_from(std::mem::size_of_val(buf))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "buffer too large"))?;
    if bytes < 16 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "buffer too small",
        ));
    }
    // argsz (u32) then flags (u32) = 0, in host byte order.
    let mut head = [0u8; 8];
    head[..4].copy_from_slice(&bytes.to_ne_bytes());
    buf[0] = u64::from_ne_bytes(head);
    // SAFETY: the fd is a VFIO container's (a `VfioContainer` holds it open while it lives), so
    // the number means VFIO_IOMMU_GET_INFO, which writes at most argsz bytes; `buf` is a live,
    // writable, 8-aligned buffer of exactly argsz bytes.
    let r = unsafe { libc::ioctl(container.as_raw_fd(), VFIO_IOMMU_GET_INFO, buf.as_mut_ptr()) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let [a0, a1, a2, a3, ..] = buf[0].to_ne_bytes();
    Ok(u32::from_ne_bytes([a0, a1, a2, a3]))
}

/// A descriptor of our own for the device (a duplicate of the one `VfioDevice` holds).
pub(crate) fn dup_device_fd(dev: &VfioDevice) -> io::Result<File> {
    // SAFETY: `dev` keeps its fd open for as long as it lives, which outlasts this borrow (the
    // borrowed fd is used only here, to duplicate it).
    let fd = unsafe { BorrowedFd::borrow_raw(dev.as_raw_fd()) };
    Ok(File::from(fd.try_clone_to_owned()?))
}

/// poll(2) for readability (retried on EINTR); which of `fds` are readable. A closed or
/// foreign fd is harmless: poll only reports on it (POLLNVAL).
pub(crate) fn poll_in(fds: &[RawFd], timeout: Duration) -> io::Result<Vec<bool>> {
    let mut p: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        })
        .collect();
    let n = libc::nfds_t::try_from(p.len())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "too many fds"))?;
    let ms = libc::c_int::try_from(timeout.as_millis()).unwrap_or(libc::c_int::MAX);
    loop {
        // SAFETY: `p` is a live, writable array of `n` pollfd structures; poll writes only their
        // `revents`.
        let r = unsafe { libc::poll(p.as_mut_ptr(), n, ms) };
        if r >= 0 {
            return Ok(p.iter().map(|x| x.revents & libc::POLLIN != 0).collect());
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Whether the calling process may open `p` for reading and writing (access(2)).
pub(crate) fn accessible_rw(p: &Path) -> bool {
    let Ok(c) = CString::new(p.as_os_str().as_encoded_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call; access(2) only reads it.
    unsafe { libc::access(c.as_ptr(), libc::R_OK | libc::W_OK) == 0 }
}

/// The soft RLIMIT_MEMLOCK in bytes (`u64::MAX` = unlimited), or `None` if getrlimit failed.
pub(crate) fn memlock_rlimit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid, writable rlimit for the duration of the call.
    if unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) } != 0 {
        return None;
    }
    Some(if r.rlim_cur == libc::RLIM_INFINITY {
        u64::MAX
    } else {
        r.rlim_cur
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use vmm_sys_util::eventfd::{EventFd, EFD_NONBLOCK};

    #[test]
    fn ioctl_numbers_match_the_uapi() {
        assert_eq!(VFIO_DEVICE_GET_INFO, 0x3b6b);
        assert_eq!(VFIO_DEVICE_RESET, 0x3b6f);
        assert_eq!(VFIO_IOMMU_GET_INFO, 0x3b70);
    }

    #[test]
    fn poll_reports_readable_fds() {
        let a = EventFd::new(EFD_NONBLOCK).unwrap();
        let b = EventFd::new(EFD_NONBLOCK).unwrap();
        let fds = [a.as_raw_fd(), b.as_raw_fd()];
        assert_eq!(
            poll_in(&fds, Duration::from_millis(1)).unwrap(),
            vec![false, false]
        );
        b.write(3).unwrap();
        assert_eq!(
            poll_in(&fds, Duration::from_secs(1)).unwrap(),
            vec![false, true]
        );
    }

    #[test]
    fn access_and_rlimit() {
        assert!(!accessible_rw(Path::new("/nonexistent/x")));
        assert!(!accessible_rw(Path::new("a\0b")));
        assert!(memlock_rlimit().is_some());
    }
}
