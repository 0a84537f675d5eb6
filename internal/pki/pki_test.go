package pki

import (
	"testing"
	"time"
)

func TestIssuedCertificates(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	ca, err := NewCA("test-ca", now, 30*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !ca.Cert.NotBefore.Equal(now.Add(-Backdate)) {
		t.Errorf("CA NotBefore %v, want backdated by %v", ca.Cert.NotBefore, Backdate)
	}
	server, err := ca.Issue("xds", []string{"portico.ns.svc", "10.0.0.1"}, ServerAuth, now, time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if got := server.Names(); len(got) != 2 || got[0] != "portico.ns.svc" || got[1] != "10.0.0.1" {
		t.Errorf("names %v", got)
	}
	if !server.IssuedBy(ca.Cert) {
		t.Error("the leaf is not issued by its CA")
	}
	other, _ := NewCA("other", now, time.Hour)
	if server.IssuedBy(other.Cert) {
		t.Error("the leaf passes as issued by another CA")
	}
	// A leaf never outlives its CA.
	long, err := ca.Issue("client", nil, ClientAuth, now, 365*24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	if !long.Cert.NotAfter.Equal(ca.Cert.NotAfter) {
		t.Errorf("leaf NotAfter %v, want the CA's %v", long.Cert.NotAfter, ca.Cert.NotAfter)
	}
	if _, err := ca.Issue("nameless", nil, ServerAuth, now, time.Hour); err == nil {
		t.Error("a server certificate without a name was issued")
	}
	back, err := ParseCA(ca.CertPEM, ca.KeyPEM)
	if err != nil || !back.Cert.Equal(ca.Cert) {
		t.Fatalf("ParseCA: %v", err)
	}
	if _, err := ParseCA(server.CertPEM, server.KeyPEM); err == nil {
		t.Error("a leaf was accepted as a CA")
	}
	certs, err := ParseBundle(append(append([]byte{}, ca.CertPEM...), other.CertPEM...))
	if err != nil || len(certs) != 2 {
		t.Fatalf("ParseBundle: %d certificates, %v", len(certs), err)
	}
}

func TestDueForRenewalAtTwoThirdsOfItsLife(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ca, _ := NewCA("ca", now, 100*24*time.Hour)
	l, _ := ca.Issue("x", nil, ClientAuth, now, 90*time.Hour)
	life := l.Cert.NotAfter.Sub(l.Cert.NotBefore)
	for _, tc := range []struct {
		at   time.Time
		want bool
	}{
		{l.Cert.NotBefore.Add(-time.Minute), false}, // made by a clock a little ahead
		{l.Cert.NotBefore, false},
		{l.Cert.NotBefore.Add(life * 2 / 3).Add(-time.Minute), false},
		{l.Cert.NotBefore.Add(life * 2 / 3).Add(time.Minute), true},
		{l.Cert.NotAfter.Add(time.Second), true},
	} {
		if got := DueForRenewal(l.Cert, tc.at); got != tc.want {
			t.Errorf("at %v after NotBefore: due %v, want %v", tc.at.Sub(l.Cert.NotBefore), got, tc.want)
		}
	}
}
