package command

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// A repository's index lists its submodules: an entry of mode 160000 (a
// gitlink) is a path git may enter, and git enters it whatever
// .gitmodules says, reading the configuration of the repository it finds
// there (issue 38, finding 2). gitlinks reads those paths from an index
// file (https://git-scm.com/docs/index-format, versions 2 to 4), so the
// guard can read those repositories' configurations too. The file is
// untrusted input: every length is checked, the parse is linear in its
// size, and FuzzGitlinks holds it to that.

// gitMaxIndexBytes bounds the index read (a repository of a few hundred
// thousand files); a larger one refuses the call rather than go unread.
const gitMaxIndexBytes = 256 << 20

// gitlinkMode is a gitlink's mode in the index (S_IFGITLINK).
const gitlinkMode = 0o160000

// errIndex is an index gitlinks cannot read.
var errIndex = errors.New("unreadable git index")

// gitIndex is what the guard needs of an index.
type gitIndex struct {
	gitlinks []string // the paths of the gitlink entries
	shared   string   // a split index's shared file (sharedindex.<hex>), if any
}

// parseGitIndex reads an index whose object names are hashLen bytes (20
// for SHA-1, 32 for SHA-256).
func parseGitIndex(b []byte, hashLen int) (gitIndex, error) {
	var ix gitIndex
	if len(b) < 12 || string(b[:4]) != "DIRC" {
		return ix, errIndex
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version < 2 || version > 4 {
		return ix, fmt.Errorf("%w: version %d", errIndex, version)
	}
	n := binary.BigEndian.Uint32(b[8:])
	pos := 12
	var prev []byte // v4: the previous entry's path
	for range n {
		// ctime, mtime (8 each), dev, ino, mode, uid, gid, size (4 each),
		// the object name, the flags.
		fixed := 40 + hashLen + 2
		if pos+fixed > len(b) {
			return ix, errIndex
		}
		mode := binary.BigEndian.Uint32(b[pos+24:])
		flags := binary.BigEndian.Uint16(b[pos+40+hashLen:])
		start := pos
		pos += fixed
		if flags&0x4000 != 0 { // extended flags (version 3 and later)
			if version < 3 || pos+2 > len(b) {
				return ix, errIndex
			}
			pos += 2
		}
		var path []byte
		if version == 4 {
			strip, m := gitVarint(b[pos:])
			if m == 0 || strip > uint64(len(prev)) {
				return ix, errIndex
			}
			pos += m
			end := bytes.IndexByte(b[pos:], 0)
			if end < 0 {
				return ix, errIndex
			}
			path = append(prev[:len(prev)-int(strip):len(prev)-int(strip)], b[pos:pos+end]...)
			pos += end + 1
		} else {
			end := bytes.IndexByte(b[pos:], 0)
			if end < 0 {
				return ix, errIndex
			}
			path = b[pos : pos+end]
			// 1 to 8 NULs pad the entry to a multiple of 8 bytes.
			pos = start + (pos+end-start+8)&^7
			if pos > len(b) {
				return ix, errIndex
			}
		}
		prev = path
		if mode&0o170000 == gitlinkMode {
			ix.gitlinks = append(ix.gitlinks, string(path))
		}
	}
	ix.shared = sharedIndexName(b[pos:], hashLen)
	return ix, nil
}

// sharedIndexName finds the "link" extension among the extensions that
// follow the entries (each a 4-byte signature and a 4-byte size) and
// names the shared index it links to; "" when there is none.
func sharedIndexName(ext []byte, hashLen int) string {
	for len(ext) >= 8+hashLen {
		size := binary.BigEndian.Uint32(ext[4:])
		if uint64(size) > uint64(len(ext)-8) {
			return ""
		}
		if string(ext[:4]) == "link" && size >= uint32(hashLen) {
			id := ext[8 : 8+hashLen]
			if bytes.Count(id, []byte{0}) == hashLen {
				return "" // not split after all
			}
			return "sharedindex." + hex.EncodeToString(id)
		}
		ext = ext[8+size:]
	}
	return ""
}

// gitVarint decodes git's offset varint (varint.c); it returns the value
// and the bytes read, 0 when the input ends or the value overflows.
func gitVarint(b []byte) (uint64, int) {
	if len(b) == 0 {
		return 0, 0
	}
	c := b[0]
	v := uint64(c & 127)
	i := 1
	for c&128 != 0 {
		v++
		if v == 0 || v>>57 != 0 || i >= len(b) {
			return 0, 0
		}
		c = b[i]
		i++
		v = v<<7 + uint64(c&127)
	}
	return v, i
}
