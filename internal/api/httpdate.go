package api

import "time"

// httpDate renders t as an HTTP date (IMF-fixdate, http.TimeFormat:
// "Mon, 02 Jan 2006 15:04:05 GMT") in UTC, without time.Format's layout
// interpretation: every document read sends one (Last-Modified).
func httpDate(t time.Time) string {
	t = t.UTC()
	year, month, day := t.Date()
	hour, min, sec := t.Clock()
	var b [29]byte
	copy(b[0:], weekdays[t.Weekday()])
	b[3], b[4] = ',', ' '
	two(b[5:], day)
	b[7] = ' '
	copy(b[8:], months[month-1])
	b[11] = ' '
	if year < 0 || year > 9999 {
		return t.Format("Mon, 02 Jan 2006 15:04:05 GMT") // not four digits
	}
	two(b[12:], year/100)
	two(b[14:], year%100)
	b[16] = ' '
	two(b[17:], hour)
	b[19] = ':'
	two(b[20:], min)
	b[22] = ':'
	two(b[23:], sec)
	copy(b[25:], " GMT")
	return string(b[:])
}

var (
	weekdays = [7]string{"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"}
	months   = [12]string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
)

// two writes v (0..99) as two digits.
func two(b []byte, v int) {
	b[0], b[1] = byte('0'+v/10), byte('0'+v%10)
}
