package types

import (
	"errors"
	"strconv"
	"strings"
	"time"
)

// Calendar helpers. Dates are proleptic Gregorian, as java.time's
// LocalDate (which Flink's runtime uses).

const (
	millisPerDay = 86400000
	nanosPerDay  = 86400 * int64(time.Second)
)

// DaysFromCivil returns the days since 1970-01-01 of a calendar date.
func DaysFromCivil(y, m, d int64) int64 {
	// Howard Hinnant's days_from_civil.
	if m <= 2 {
		y--
	}
	era := y
	if era < 0 {
		era -= 399
	}
	era /= 400
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// CivilFromDays returns the calendar date of days since 1970-01-01.
func CivilFromDays(z int64) (y, m, d int64) {
	z += 719468
	era := z
	if era < 0 {
		era -= 146096
	}
	era /= 146097
	doe := z - era*146097
	yoe := (doe - doe/1460 + doe/36524 - doe/146096) / 365
	y = yoe + era*400
	doy := doe - (365*yoe + yoe/4 - yoe/100)
	mp := (5*doy + 2) / 153
	d = doy - (153*mp+2)/5 + 1
	if mp < 10 {
		m = mp + 3
	} else {
		m = mp - 9
	}
	if m <= 2 {
		y++
	}
	return y, m, d
}

// SplitMillis splits milliseconds since the epoch into days since the
// epoch and milliseconds of the day.
func SplitMillis(ms int64) (days, msOfDay int64) { return floorDiv(ms, millisPerDay) }

func appendPadded(dst []byte, v int64, width int) []byte {
	if v < 0 {
		dst = append(dst, '-')
		v = -v
	}
	var buf [20]byte
	s := strconv.AppendInt(buf[:0], v, 10)
	for i := len(s); i < width; i++ {
		dst = append(dst, '0')
	}
	return append(dst, s...)
}

// AppendDate appends yyyy-MM-dd.
func AppendDate(dst []byte, days int64) []byte {
	y, m, d := CivilFromDays(days)
	dst = appendPadded(dst, y, 4)
	dst = append(dst, '-')
	dst = appendPadded(dst, m, 2)
	dst = append(dst, '-')
	return appendPadded(dst, d, 2)
}

// AppendTime appends HH:mm:ss and, for precision > 0, that many fraction
// digits.
func AppendTime(dst []byte, nanoOfDay int64, precision int) []byte {
	sec := nanoOfDay / 1e9
	dst = appendPadded(dst, sec/3600, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, sec/60%60, 2)
	dst = append(dst, ':')
	dst = appendPadded(dst, sec%60, 2)
	return appendFraction(dst, nanoOfDay%1e9, precision)
}

func appendFraction(dst []byte, nanos int64, precision int) []byte {
	if precision <= 0 {
		return dst
	}
	precision = min(precision, 9)
	dst = append(dst, '.')
	return appendPadded(dst, nanos/pow10[9-precision], precision)
}

// AppendTimestamp appends `yyyy-MM-dd HH:mm:ss[.fff...]` with exactly
// precision fraction digits, the form of Flink's CAST(ts AS STRING).
func AppendTimestamp(dst []byte, millis int64, nanoOfMilli int32, precision int) []byte {
	days, ms := SplitMillis(millis)
	dst = AppendDate(dst, days)
	dst = append(dst, ' ')
	return AppendTime(dst, ms*1e6+int64(nanoOfMilli), precision)
}

// ErrBadTemporal is wrapped by the parsers of date and time text.
var ErrBadTemporal = errors.New("not a valid date/time")

func atoiAll(s string) (int64, bool) {
	if s == "" || len(s) > 10 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// ParseDate parses `yyyy-[M]M-[d]d` into days since the epoch.
func ParseDate(s string) (int64, error) {
	s = strings.TrimSpace(s)
	parts := strings.Split(s, "-")
	neg := false
	if len(parts) == 4 && parts[0] == "" {
		neg = true
		parts = parts[1:]
	}
	if len(parts) != 3 {
		return 0, ErrBadTemporal
	}
	y, ok1 := atoiAll(parts[0])
	m, ok2 := atoiAll(parts[1])
	d, ok3 := atoiAll(parts[2])
	if !ok1 || !ok2 || !ok3 || m < 1 || m > 12 || d < 1 || d > daysInMonth(y, m) {
		return 0, ErrBadTemporal
	}
	if neg {
		y = -y
	}
	return DaysFromCivil(y, m, d), nil
}

func isLeap(y int64) bool { return y%4 == 0 && (y%100 != 0 || y%400 == 0) }

func daysInMonth(y, m int64) int64 {
	switch m {
	case 2:
		if isLeap(y) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// ParseTime parses `HH:mm[:ss[.fffffffff]]` into nanoseconds of the day.
func ParseTime(s string) (int64, error) {
	s = strings.TrimSpace(s)
	frac := ""
	if i := strings.IndexByte(s, '.'); i >= 0 {
		s, frac = s[:i], s[i+1:]
	}
	parts := strings.Split(s, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, ErrBadTemporal
	}
	var hms [3]int64
	for i, p := range parts {
		v, ok := atoiAll(p)
		if !ok || len(p) > 2 {
			return 0, ErrBadTemporal
		}
		hms[i] = v
	}
	if hms[0] > 23 || hms[1] > 59 || hms[2] > 59 || (frac != "" && len(parts) < 3) {
		return 0, ErrBadTemporal
	}
	var ns int64
	if frac != "" {
		if len(frac) > 9 {
			return 0, ErrBadTemporal
		}
		f, ok := atoiAll(frac)
		if !ok {
			return 0, ErrBadTemporal
		}
		ns = f * pow10[9-len(frac)]
	}
	return (hms[0]*3600+hms[1]*60+hms[2])*1e9 + ns, nil
}

// ParseTimestamp parses `yyyy-MM-dd[( |T)HH:mm[:ss[.f...]]]` into
// milliseconds since the epoch and nanoseconds of the millisecond.
func ParseTimestamp(s string) (int64, int32, error) {
	s = strings.TrimSpace(s)
	datePart, timePart := s, ""
	if i := strings.IndexAny(s, " T"); i >= 0 {
		datePart, timePart = s[:i], strings.TrimSpace(s[i+1:])
	}
	days, err := ParseDate(datePart)
	if err != nil {
		return 0, 0, err
	}
	var ns int64
	if timePart != "" {
		if ns, err = ParseTime(timePart); err != nil {
			return 0, 0, err
		}
	}
	return days*millisPerDay + ns/1e6, int32(ns % 1e6), nil
}

// LocalToInstantMillis converts a wall-clock reading (TIMESTAMP millis) in
// loc to epoch millis (TIMESTAMP_LTZ), resolving gaps and overlaps as
// java.time does (the earlier offset).
func LocalToInstantMillis(local int64, loc *time.Location) int64 {
	if loc == nil || loc == time.UTC {
		return local
	}
	days, ms := SplitMillis(local)
	y, m, d := CivilFromDays(days)
	sec := ms / 1000
	t := time.Date(int(y), time.Month(m), int(d), int(sec/3600), int(sec/60%60), int(sec%60), int(ms%1000)*1e6, loc)
	return t.UnixMilli()
}

// InstantToLocalMillis converts epoch millis to the wall-clock reading in
// loc, as milliseconds.
func InstantToLocalMillis(instant int64, loc *time.Location) int64 {
	if loc == nil || loc == time.UTC {
		return instant
	}
	sec, _ := floorDiv(instant, 1000)
	_, off := time.Unix(sec, 0).In(loc).Zone()
	return instant + int64(off)*1000
}
