package state

import (
	"bytes"
	"fmt"
	"io"
	"testing"
)

// memShared is a SharedWriter in memory, for tests of this package.
type memShared struct{ files map[string][]byte }

func (m *memShared) Put(name, path string) error { return fmt.Errorf("memShared cannot put %s", path) }
func (m *memShared) Has(name string) bool        { _, ok := m.files[name]; return ok }
func (m *memShared) Path(name string) (string, error) {
	return "", fmt.Errorf("memShared has no paths (%s)", name)
}
func (m *memShared) Write(name string, write func(io.Writer) error) error {
	var b bytes.Buffer
	if err := write(&b); err != nil {
		return err
	}
	m.files[name] = b.Bytes()
	return nil
}
func (m *memShared) WriteUnpinned(name string, write func(io.Writer) error) error {
	return m.Write(name, write)
}

// Once the chain exists, a checkpoint captures the changes and leaves the
// slot arrays to the table: a write after the capture neither copies the
// key group's arrays nor finds them shared, and a value the capture holds
// is not changed by it.
func TestCaptureOfChangesCopiesNoSlots(t *testing.T) {
	b, err := NewMemoryBackendWith(MemoryOptions{Incremental: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.Open(KeyGroupRange{Start: 0, End: 1}, 1); err != nil {
		t.Fatal(err)
	}
	v, err := NewValue(b, "v", CodecFor[int64](), CodecFor[int64]())
	if err != nil {
		t.Fatal(err)
	}
	for k := range int64(1000) {
		v.Put(k, k)
	}
	sf := &memShared{files: map[string][]byte{}}
	persist := func(c Captured) {
		t.Helper()
		if _, err := c.(FileCaptured).PersistFiles(sf); err != nil {
			t.Fatal(err)
		}
	}
	c, err := b.Capture() // the first: frozen whole
	if err != nil {
		t.Fatal(err)
	}
	persist(c)
	v.Put(1, 10) // copies the arrays the first capture froze
	s := &v.t.shards[0]
	before := &s.slots[0]
	c, err = b.Capture()
	if err != nil {
		t.Fatal(err)
	}
	v.Put(2, 20)
	v.Put(5000, 1)
	if s.shared || &s.slots[0] != before {
		t.Fatalf("a write after a capture of changes copied the key group's slots (shared %v)", s.shared)
	}
	d, ok := c.(*incrCapture).frozen[0].(*changedCow[int64, int64])
	if !ok {
		t.Fatalf("the capture holds %T, want a capture of changes", c.(*incrCapture).frozen[0])
	}
	if l := &d.groups[0]; l.size() != 1 || l.at(0).k != 1 || l.at(0).v != 10 || !l.at(0).present {
		t.Fatalf("the capture of changes holds %+v, want key 1 = 10", l)
	}
	persist(c)
}
