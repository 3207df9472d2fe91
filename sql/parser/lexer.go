package parser

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/clinkstream/clink/sql/ast"
)

type tokKind int

const (
	tokEOF tokKind = iota
	// tokError ends the token stream at a lexical error; text is the
	// message.
	tokError
	// tokWord is an unquoted word: an identifier or a keyword.
	tokWord
	// tokQuoted is a `back-quoted` identifier; text is the name.
	tokQuoted
	// tokString is a 'string'; text is the value.
	tokString
	// tokBinary is X'0A1F'; text is the hex digits.
	tokBinary
	// tokNumber is an unsigned numeric literal; text is as written.
	tokNumber
	// tokOp is punctuation or an operator; text is the symbol.
	tokOp
)

type token struct {
	kind tokKind
	text string
	pos  ast.Pos
}

// describe names the token for "found X" in error messages.
func (t token) describe() string {
	switch t.kind {
	case tokEOF:
		return "end of input"
	case tokWord:
		if ast.IsReserved(t.text) {
			return "keyword " + strings.ToUpper(t.text)
		}
		return "identifier " + t.text
	case tokQuoted:
		return "identifier `" + t.text + "`"
	case tokString:
		s := t.text
		if utf8.RuneCountInString(s) > 24 {
			s = string([]rune(s)[:24]) + "..."
		}
		return "string " + ast.QuoteString(s)
	case tokBinary:
		return "binary string X'" + t.text + "'"
	case tokNumber:
		return "number " + t.text
	case tokOp:
		return "'" + t.text + "'"
	default:
		return t.text
	}
}

// lexer turns SQL text into tokens, skipping white space and comments
// (-- to end of line, /* ... */, which includes /*+ hints */).
type lexer struct {
	src  string
	off  int
	line int
	col  int
	toks []token
}

// lex returns every token of src, ending with a tokEOF, or with a tokError
// at the first lexical error.
func lex(src string) []token {
	lx := &lexer{src: src, line: 1, col: 1}
	for {
		t := lx.next()
		lx.toks = append(lx.toks, t)
		if t.kind == tokEOF || t.kind == tokError {
			return lx.toks
		}
	}
}

func (lx *lexer) pos() ast.Pos { return ast.Pos{Line: lx.line, Col: lx.col, Offset: lx.off} }

func (lx *lexer) peekByte(n int) byte {
	if lx.off+n < len(lx.src) {
		return lx.src[lx.off+n]
	}
	return 0
}

// advance moves past n bytes, keeping line and column.
func (lx *lexer) advance(n int) {
	for i := 0; i < n && lx.off < len(lx.src); i++ {
		c := lx.src[lx.off]
		lx.off++
		switch {
		case c == '\n':
			lx.line++
			lx.col = 1
		case c&0xC0 != 0x80: // count the first byte of each character
			lx.col++
		}
	}
}

func (lx *lexer) errorf(pos ast.Pos, format string, args ...any) token {
	return token{kind: tokError, text: fmt.Sprintf(format, args...), pos: pos}
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordStart(r rune) bool {
	return r == '_' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= utf8.RuneSelf && unicode.IsLetter(r)
}

func isWordPart(r rune) bool {
	return isWordStart(r) || r >= '0' && r <= '9' || r == '$' || r >= utf8.RuneSelf && (unicode.IsDigit(r) || unicode.Is(unicode.Mn, r))
}

func (lx *lexer) skipSpaceAndComments() *token {
	for lx.off < len(lx.src) {
		c := lx.src[lx.off]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v':
			lx.advance(1)
		case c == '-' && lx.peekByte(1) == '-':
			for lx.off < len(lx.src) && lx.src[lx.off] != '\n' {
				lx.advance(1)
			}
		case c == '/' && lx.peekByte(1) == '*':
			start := lx.pos()
			lx.advance(2)
			for {
				if lx.off >= len(lx.src) {
					t := lx.errorf(lx.pos(), "expected '*/' to close the comment opened at %s, found end of input", start)
					return &t
				}
				if lx.src[lx.off] == '*' && lx.peekByte(1) == '/' {
					lx.advance(2)
					break
				}
				lx.advance(1)
			}
		default:
			return nil
		}
	}
	return nil
}

func (lx *lexer) next() token {
	if t := lx.skipSpaceAndComments(); t != nil {
		return *t
	}
	pos := lx.pos()
	if lx.off >= len(lx.src) {
		return token{kind: tokEOF, pos: pos}
	}
	c := lx.src[lx.off]
	r, size := utf8.DecodeRuneInString(lx.src[lx.off:])
	switch {
	case (c == 'x' || c == 'X') && lx.peekByte(1) == '\'':
		lx.advance(1)
		t := lx.quoted('\'', pos, "binary string")
		if t.kind == tokError {
			return t
		}
		for i := 0; i < len(t.text); i++ {
			if !strings.ContainsRune("0123456789abcdefABCDEF", rune(t.text[i])) {
				return lx.errorf(pos, "binary string X'...' may hold only hex digits, found %q", t.text[i])
			}
		}
		if len(t.text)%2 != 0 {
			return lx.errorf(pos, "binary string X'...' needs an even number of hex digits, found %d", len(t.text))
		}
		return token{kind: tokBinary, text: strings.ToUpper(t.text), pos: pos}
	case isWordStart(r):
		start := lx.off
		for lx.off < len(lx.src) {
			r, size := utf8.DecodeRuneInString(lx.src[lx.off:])
			if !isWordPart(r) {
				break
			}
			lx.advance(size)
		}
		return token{kind: tokWord, text: lx.src[start:lx.off], pos: pos}
	case isDigit(c) || c == '.' && isDigit(lx.peekByte(1)) && !lx.afterOperand():
		return lx.number(pos)
	case c == '\'':
		return lx.quoted('\'', pos, "string")
	case c == '`':
		t := lx.quoted('`', pos, "quoted identifier")
		if t.kind == tokString {
			if t.text == "" {
				return lx.errorf(pos, "empty quoted identifier ``")
			}
			t.kind = tokQuoted
		}
		return t
	case c == '"':
		return lx.errorf(pos, "unexpected '\"': quote identifiers with back quotes (`name`) and strings with single quotes ('text')")
	case c == '$' && lx.peekByte(1) == '{':
		return lx.errorf(pos, "unexpected '${': substitute the placeholder before parsing")
	}
	for _, op := range [...]string{"||", "<>", "<=", ">=", "!=", "=>"} {
		if strings.HasPrefix(lx.src[lx.off:], op) {
			lx.advance(2)
			return token{kind: tokOp, text: op, pos: pos}
		}
	}
	if strings.IndexByte("()[],;.+-*/%=<>?", c) >= 0 {
		lx.advance(1)
		return token{kind: tokOp, text: string(c), pos: pos}
	}
	if r == utf8.RuneError && size <= 1 {
		return lx.errorf(pos, "invalid UTF-8 byte %#x", c)
	}
	return lx.errorf(pos, "unexpected character %q", r)
}

// afterOperand reports whether the previous token ends an operand, so that
// a following '.' is a field separator (t.1 is not t followed by .1).
func (lx *lexer) afterOperand() bool {
	if len(lx.toks) == 0 {
		return false
	}
	t := lx.toks[len(lx.toks)-1]
	return t.kind == tokWord || t.kind == tokQuoted || t.kind == tokOp && (t.text == ")" || t.text == "]")
}

func (lx *lexer) number(pos ast.Pos) token {
	start := lx.off
	digits := func() int {
		n := 0
		for isDigit(lx.peekByte(0)) {
			lx.advance(1)
			n++
		}
		return n
	}
	digits()
	if lx.peekByte(0) == '.' {
		lx.advance(1)
		digits()
	}
	if c := lx.peekByte(0); c == 'e' || c == 'E' {
		lx.advance(1)
		if c := lx.peekByte(0); c == '+' || c == '-' {
			lx.advance(1)
		}
		if digits() == 0 {
			return lx.errorf(lx.pos(), "expected digits of the exponent of number %s", lx.src[start:lx.off])
		}
	}
	if lx.off < len(lx.src) {
		if r, _ := utf8.DecodeRuneInString(lx.src[lx.off:]); isWordPart(r) || r == '.' {
			return lx.errorf(lx.pos(), "unexpected %q after number %s", r, lx.src[start:lx.off])
		}
	}
	return token{kind: tokNumber, text: strings.ToUpper(lx.src[start:lx.off]), pos: pos}
}

// quoted reads text between quote characters, where a doubled quote stands
// for one. It returns a tokString whose text is the unquoted value.
func (lx *lexer) quoted(q byte, pos ast.Pos, what string) token {
	lx.advance(1)
	var b strings.Builder
	for {
		if lx.off >= len(lx.src) {
			return lx.errorf(lx.pos(), "expected %c to close the %s opened at %s, found end of input", q, what, pos)
		}
		c := lx.src[lx.off]
		if c == q {
			if lx.peekByte(1) == q {
				b.WriteByte(q)
				lx.advance(2)
				continue
			}
			lx.advance(1)
			return token{kind: tokString, text: b.String(), pos: pos}
		}
		b.WriteByte(c)
		lx.advance(1)
	}
}
