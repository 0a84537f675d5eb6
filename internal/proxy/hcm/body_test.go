package hcm

import (
	"bytes"
	"io"
	"testing"
)

// whole keeps a body of up to maxReplayBytes for an internal redirect's target;
// past that it refuses, and the attempt reading the body still gets every byte,
// those whole read ahead included, in order.
func TestReplayBufferWhole(t *testing.T) {
	for _, tc := range []struct {
		size      int
		readFirst int // bytes the attempt reads before whole is asked
		want      bool
	}{
		{0, 0, true},
		{100, 10, true},
		{maxReplayBytes, 0, true},
		{maxReplayBytes + 1, 0, false},
		{3 * maxReplayBytes, 5000, false},
	} {
		body := make([]byte, tc.size)
		for i := range body {
			body[i] = byte(i * 7)
		}
		b := newReplayBuffer(bytes.NewReader(body))
		r := b.reader(nil)
		first := make([]byte, tc.readFirst)
		if _, err := io.ReadFull(r, first); err != nil {
			t.Fatalf("size %d: reading %d bytes: %v", tc.size, tc.readFirst, err)
		}
		if got := b.whole(); got != tc.want {
			t.Errorf("size %d: whole() = %v, want %v", tc.size, got, tc.want)
		}
		rest, err := io.ReadAll(r)
		if err != nil || !bytes.Equal(append(first, rest...), body) {
			t.Errorf("size %d: the attempt read %d bytes (err %v), not the body", tc.size, len(first)+len(rest), err)
		}
		if tc.want {
			again, _ := io.ReadAll(b.reader(nil))
			if !bytes.Equal(again, body) || b.size() != int64(tc.size) {
				t.Errorf("size %d: the redirect's target would get %d bytes", tc.size, len(again))
			}
		}
	}
}
