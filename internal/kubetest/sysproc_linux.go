package kubetest

import "syscall"

// sysProcAttr makes the kernel kill the child when the test binary dies without
// calling Stop (a panic, a timeout, SIGKILL), so no etcd or kube-apiserver outlives it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
