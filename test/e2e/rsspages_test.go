package e2e

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// sectionPages is how much of one section of the daemon's binary the
// process has resident: the pages its page table maps.
type sectionPages struct {
	name           string
	size, resident uint64 // bytes
}

// residentSections reads which pages of its executable's mappings process
// pid has present (/proc/PID/pagemap, as root), and adds them up by the
// ELF sections of binary (the same build, which may carry the symbols the
// installed copy lacks). It explains the file-backed part of the RSS: a
// Go binary's initialisers touch a page in each package's code, and the
// kernel maps the pages around each fault with it (fault-around, 64 KB).
func residentSections(pid int, binary string) ([]sectionPages, error) {
	present, err := presentExecPages(pid)
	if err != nil {
		return nil, err
	}
	f, err := elf.Open(binary)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []sectionPages
	for _, s := range f.Sections {
		if s.Flags&elf.SHF_ALLOC == 0 || s.Size == 0 || s.Type == elf.SHT_NOBITS {
			continue
		}
		sp := sectionPages{name: s.Name, size: s.Size}
		for p := s.Addr &^ 4095; p < s.Addr+s.Size; p += 4096 {
			if present[p] {
				sp.resident += min(p+4096, s.Addr+s.Size) - max(p, s.Addr)
			}
		}
		out = append(out, sp)
	}
	return out, nil
}

// presentExecPages is the set of page addresses that pid has present in
// the mappings of its own executable.
func presentExecPages(pid int) (map[uint64]bool, error) {
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err != nil {
		return nil, err
	}
	maps, err := os.Open(fmt.Sprintf("/proc/%d/maps", pid))
	if err != nil {
		return nil, err
	}
	defer maps.Close()
	pagemap, err := os.Open(fmt.Sprintf("/proc/%d/pagemap", pid))
	if err != nil {
		return nil, err
	}
	defer pagemap.Close()
	present := map[uint64]bool{}
	sc := bufio.NewScanner(maps)
	for sc.Scan() {
		// start-end perms offset dev inode path
		f := strings.Fields(sc.Text())
		if len(f) < 6 || f[5] != exe {
			continue
		}
		lo, hi, _ := strings.Cut(f[0], "-")
		start, err1 := strconv.ParseUint(lo, 16, 64)
		end, err2 := strconv.ParseUint(hi, 16, 64)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("/proc/%d/maps: bad range %q", pid, f[0])
		}
		// One 64-bit entry per page; bit 63 is "present".
		buf := make([]byte, (end-start)/4096*8)
		if _, err := pagemap.ReadAt(buf, int64(start/4096*8)); err != nil {
			return nil, fmt.Errorf("/proc/%d/pagemap: %w", pid, err)
		}
		for i := range (end - start) / 4096 {
			if binary.LittleEndian.Uint64(buf[i*8:])&(1<<63) != 0 {
				present[start+i*4096] = true
			}
		}
	}
	return present, sc.Err()
}
