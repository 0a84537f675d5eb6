//go:build !linux

package rawsock

import "syscall"

// Elsewhere Wrap finds no socket, and callers use the connection's own calls.

const supported = false

// ReadFD is not made outside Linux.
func ReadFD(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }

// WriteFD is not made outside Linux.
func WriteFD(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }

// PeekFD is not made outside Linux.
func PeekFD(uintptr, []byte) (int, syscall.Errno) { return 0, syscall.ENOSYS }
