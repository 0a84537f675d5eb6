//go:build linux

package rawsock

import "syscall"

const supported = true

// ReadFD is read(2) of a non-blocking socket.
func ReadFD(fd uintptr, p []byte) (int, syscall.Errno) {
	if instrumented {
		n, err := syscall.Read(int(fd), p)
		return n, errnoOf(err)
	}
	return rawRead(fd, p)
}

// WriteFD is write(2) to a non-blocking socket.
func WriteFD(fd uintptr, p []byte) (int, syscall.Errno) {
	if instrumented {
		n, err := syscall.Write(int(fd), p)
		return n, errnoOf(err)
	}
	return rawWrite(fd, p)
}

// PeekFD is recv(2) of a socket with MSG_PEEK and MSG_DONTWAIT: what waits,
// left unread.
func PeekFD(fd uintptr, p []byte) (int, syscall.Errno) {
	if instrumented {
		n, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
		return n, errnoOf(err)
	}
	return rawPeek(fd, p)
}

// errnoOf is the errno a call of package syscall failed with.
func errnoOf(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	if errno, ok := err.(syscall.Errno); ok {
		return errno
	}
	return syscall.EIO
}
