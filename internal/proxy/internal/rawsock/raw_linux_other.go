//go:build linux && !(amd64 || arm64)

package rawsock

import "syscall"

// On Linux's other architectures (some reach recvfrom through socketcall)
// the calls are package syscall's: the same behaviour, without the saving.

func rawRead(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Read(int(fd), p)
	return n, errnoOf(err)
}

func rawWrite(fd uintptr, p []byte) (int, syscall.Errno) {
	n, err := syscall.Write(int(fd), p)
	return n, errnoOf(err)
}

func rawPeek(fd uintptr, p []byte) (int, syscall.Errno) {
	n, _, err := syscall.Recvfrom(int(fd), p, syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
	return n, errnoOf(err)
}
