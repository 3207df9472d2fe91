package state

import (
	"fmt"
	"os"
	"syscall"
)

// mapFile returns the bytes of the file at path mapped read-only, its
// pages mapped up front (MAP_POPULATE): a restore reads every byte of a
// chain file, and the pages are usually in the page cache already, as the
// checkpoint wrote or read them recently. Mapped, they are neither copied
// nor backed by fresh memory of the process, which on some virtual
// machines costs microseconds per page on its first touch. mapped is false
// when the bytes were read instead (an empty file); unmapFile releases
// mapped bytes.
func mapFile(path string) (data []byte, mapped bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, false, err
	}
	size := st.Size()
	if size == 0 || size != int64(int(size)) {
		data, err = os.ReadFile(path)
		return data, false, err
	}
	data, err = syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_PRIVATE|syscall.MAP_POPULATE)
	if err != nil {
		// Where mapping is refused (a file system without mmap), read.
		data, rerr := os.ReadFile(path)
		if rerr != nil {
			return nil, false, fmt.Errorf("%w (mapping it: %v)", rerr, err)
		}
		return data, false, nil
	}
	return data, true, nil
}

// unmapFile releases bytes mapFile mapped.
func unmapFile(data []byte) error { return syscall.Munmap(data) }
