package store

import (
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func changedNames(t *testing.T, now, prev *Journal) []string {
	t.Helper()
	changes, ok := now.ChangesSince(prev)
	if !ok {
		t.Fatal("the journals should tell what changed")
	}
	var out []string
	for _, c := range changes {
		out = append(out, c.Key.Name)
	}
	return out
}

// TestJournalChangesSince checks the three cases a builder meets: a store that went on
// changing, a clone and its original that changed apart (both sides count), and a store
// so far ahead that its journal no longer reaches back (the builder must compare all).
func TestJournalChangesSince(t *testing.T) {
	svc := func(name string) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}}
	}
	s := New()
	s.Upsert(svc("a"))
	before := s.Journal()
	s.Upsert(svc("b"))
	s.Delete(svc("a"))
	if got := changedNames(t, s.Journal(), before); fmt.Sprint(got) != "[b a]" {
		t.Fatalf("a store that went on: got %v, want [b a]", got)
	}

	fork := s.Clone()
	fork.Upsert(svc("kept"))
	s.Upsert(svc("c"))
	if got := changedNames(t, s.Journal(), fork.Journal()); fmt.Sprint(got) != "[kept c]" {
		t.Fatalf("stores that changed apart: got %v, want [kept c]", got)
	}
	if got := changedNames(t, s.Journal(), s.Journal()); len(got) != 0 {
		t.Fatalf("a journal against itself: got %v", got)
	}

	old := s.Journal()
	for i := range journalSize + 1 {
		s.Upsert(svc(fmt.Sprint(i)))
	}
	if _, ok := s.Journal().ChangesSince(old); ok {
		t.Fatal("a journal that no longer reaches back must say it cannot tell")
	}
	if _, ok := New().Journal().ChangesSince(New().Journal()); !ok {
		t.Fatal("two empty journals: nothing changed")
	}
}
