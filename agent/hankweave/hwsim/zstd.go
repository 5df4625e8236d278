package hwsim

import (
	"encoding/binary"
	"errors"
)

// The runtime compresses its journal with zstd. The standard library has no
// zstd, so the simulator writes a valid zstd frame made of raw (stored)
// blocks: any zstd decoder reads it, and so does unzstdRaw.

const zstdMagic = 0xFD2FB528

const zstdMaxBlock = 128 << 10

// zstdRaw wraps data in one zstd frame of raw blocks.
func zstdRaw(data []byte) []byte {
	out := binary.LittleEndian.AppendUint32(nil, zstdMagic)
	// Frame header descriptor: 8-byte content size (FCS flag 3), single segment.
	out = append(out, 0xE0)
	out = binary.LittleEndian.AppendUint64(out, uint64(len(data)))
	for {
		n := len(data)
		if n > zstdMaxBlock {
			n = zstdMaxBlock
		}
		last := 0
		if n == len(data) {
			last = 1
		}
		h := uint32(last) | 0<<1 | uint32(n)<<3 // block type 0: raw
		out = append(out, byte(h), byte(h>>8), byte(h>>16))
		out = append(out, data[:n]...)
		data = data[n:]
		if last == 1 {
			return out
		}
	}
}

// unzstdRaw reads back a frame written by zstdRaw (raw and RLE blocks only).
func unzstdRaw(b []byte) ([]byte, error) {
	bad := errors.New("hwsim: not a raw-block zstd frame")
	if len(b) < 13 || binary.LittleEndian.Uint32(b) != zstdMagic || b[4] != 0xE0 {
		return nil, bad
	}
	size := binary.LittleEndian.Uint64(b[5:])
	b = b[13:]
	var out []byte
	for {
		if len(b) < 3 {
			return nil, bad
		}
		h := uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16
		b = b[3:]
		last, typ, n := h&1, (h>>1)&3, int(h>>3)
		switch typ {
		case 0:
			if len(b) < n {
				return nil, bad
			}
			out = append(out, b[:n]...)
			b = b[n:]
		case 1:
			if len(b) < 1 {
				return nil, bad
			}
			for i := 0; i < n; i++ {
				out = append(out, b[0])
			}
			b = b[1:]
		default:
			return nil, bad
		}
		if last == 1 {
			break
		}
	}
	if uint64(len(out)) != size {
		return nil, bad
	}
	return out, nil
}
