package control

import "unicode/utf8"

// CountChars is the number of characters of s for text limits and metering:
// Unicode code points (docs/api.md#synthesis), so "नमस्ते" is 6 characters
// although it is 18 bytes and 3 grapheme clusters. Invalid UTF-8 bytes count
// one each, as utf8.RuneCountInString does.
func CountChars(s string) int64 { return int64(utf8.RuneCountInString(s)) }
