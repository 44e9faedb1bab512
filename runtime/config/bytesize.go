package config

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"
)

// ByteSize is a size in bytes. In YAML it is a plain integer (bytes) or a
// number with a unit: B, KiB, MiB, GiB, TiB (powers of 1024) or kB, MB, GB,
// TB (powers of 1000), as in "64MiB", "1.5GiB" or "512 KiB".
type ByteSize uint64

// Binary units.
const (
	KiB ByteSize = 1 << 10
	MiB ByteSize = 1 << 20
	GiB ByteSize = 1 << 30
)

var byteUnits = map[string]float64{
	"":    1,
	"B":   1,
	"KIB": 1 << 10, "MIB": 1 << 20, "GIB": 1 << 30, "TIB": 1 << 40,
	"KB": 1e3, "MB": 1e6, "GB": 1e9, "TB": 1e12,
}

// ParseByteSize parses a size such as "64MiB", "512 KiB" or "30000".
// Fractions are allowed but the result must be a whole number of bytes.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.TrimSpace(s)
	i := 0
	for i < len(t) && (t[i] >= '0' && t[i] <= '9' || t[i] == '.') {
		i++
	}
	num, unit := t[:i], strings.ToUpper(strings.TrimSpace(t[i:]))
	mult, ok := byteUnits[unit]
	if num == "" || !ok {
		return 0, fmt.Errorf("size %q: want a number of bytes or a number with a unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)", s)
	}
	if !strings.Contains(num, ".") {
		n, err := strconv.ParseUint(num, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("size %q: %w", s, errOverflow)
		}
		if n > math.MaxUint64/uint64(mult) {
			return 0, fmt.Errorf("size %q: %w", s, errOverflow)
		}
		return ByteSize(n * uint64(mult)), nil
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil {
		return 0, fmt.Errorf("size %q: bad number", s)
	}
	v := f * mult
	if v >= math.MaxUint64 {
		return 0, fmt.Errorf("size %q: %w", s, errOverflow)
	}
	if v != math.Trunc(v) {
		return 0, fmt.Errorf("size %q is not a whole number of bytes", s)
	}
	return ByteSize(v), nil
}

var errOverflow = errors.New("too large")

// String renders the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	switch {
	case b == 0:
		return "0"
	case b%GiB == 0:
		return strconv.FormatUint(uint64(b/GiB), 10) + "GiB"
	case b%MiB == 0:
		return strconv.FormatUint(uint64(b/MiB), 10) + "MiB"
	case b%KiB == 0:
		return strconv.FormatUint(uint64(b/KiB), 10) + "KiB"
	}
	return strconv.FormatUint(uint64(b), 10)
}

// MarshalYAML writes the String form, which ParseByteSize reads back.
func (b ByteSize) MarshalYAML() (any, error) {
	if b%KiB != 0 || b == 0 {
		return uint64(b), nil
	}
	return b.String(), nil
}

// UnmarshalYAML accepts an integer or a string with a unit.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	v, err := decodeByteSize(n)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

func decodeByteSize(n *yaml.Node) (ByteSize, error) {
	if n.Kind != yaml.ScalarNode {
		return 0, fmt.Errorf("want a size such as 64MiB, got a %s", kindName(n))
	}
	switch n.ShortTag() {
	case "!!int":
		var v int64
		if err := n.Decode(&v); err != nil || v < 0 {
			return 0, fmt.Errorf("size %s: want a non-negative number of bytes", n.Value)
		}
		return ByteSize(v), nil
	case "!!str", "!!float":
		return ParseByteSize(n.Value)
	}
	return 0, fmt.Errorf("want a size such as 64MiB, got %s", describe(n))
}
