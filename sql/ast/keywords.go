package ast

import "strings"

// reserved are the words an unquoted identifier may not be. The list follows
// Flink's reserved keywords (Calcite's SQL:2003 list) where a word matters to
// the grammar or is commonly a column name users must quote (`value`,
// `day`, `timestamp`); words Flink reserves only as standard function names
// (COUNT, LOWER, ...) stay usable as identifiers here.
var reserved = wordSet(`
ALL AND ANY ARRAY AS ASYMMETRIC BETWEEN BOTH BY CASE CAST CONSTRAINT CREATE
CROSS CUBE CURRENT CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP DATE DAY
DESCRIBE DISTINCT DROP ELSE END ESCAPE EXCEPT EXISTS EXTRACT FALSE FETCH
FILTER FOR FROM FULL GROUP GROUPING HAVING HOUR IN INNER INSERT INTERSECT
INTERVAL INTO IS JOIN LATERAL LEADING LEFT LIKE LIMIT LOCALTIME
LOCALTIMESTAMP MAP MINUTE MONTH MULTISET NATURAL NOT NULL OFFSET ON OR ORDER
OUTER OVER PARTITION PRIMARY RANGE RIGHT ROLLUP ROW ROWS SECOND SELECT SET
SIMILAR SOME SYMMETRIC TABLE THEN TIME TIMESTAMP TO TRAILING TRUE UNION
UNIQUE UNKNOWN UNNEST USING VALUE VALUES WHEN WHERE WINDOW WITH YEAR
`)

// keywords are words with a meaning somewhere in the grammar that are not
// reserved. They are valid identifiers, but the printer quotes them anyway
// so that printed SQL never depends on which position tolerates them.
var keywords = wordSet(`
ASC BEGIN BIGINT BINARY BOOLEAN BYTES CEIL CEILING CHAR CHARACTER
CHANGELOG_MODE COMMENT DEC DECIMAL DESC DESCRIPTOR DOUBLE ENFORCED
ESTIMATED_COST EXECUTE EXPLAIN FIRST FLOAT FOLLOWING FUNCTION IF INT INTEGER
JSON_EXECUTION_PLAN KEY LANGUAGE LAST LOCAL METADATA NEXT NULLS NUMERIC OF
ONLY ORDINALITY OVERWRITE PARTITIONED PLAN PLAN_ADVICE POSITION PRECEDING
PRECISION RESET SETS SMALLINT STATEMENT STRING SUBSTRING SYSTEM SYSTEM_TIME
TEMPORARY TIMESTAMP_LTZ TIMESTAMPADD TIMESTAMPDIFF TINYINT TRIM TRY_CAST
UNBOUNDED VARBINARY VARCHAR VARYING VIEW VIRTUAL WITHOUT ZONE
WEEK QUARTER MILLISECOND MICROSECOND NANOSECOND EPOCH DOW DOY ISODOW
ISOYEAR DECADE CENTURY MILLENNIUM
`)

// functionKeywords are reserved words that may still name a function when
// followed by '(' (LEFT(s, 2), HOUR(ts), GROUPING(a)).
var functionKeywords = wordSet(`
LEFT RIGHT YEAR MONTH DAY HOUR MINUTE SECOND GROUPING CURRENT_DATE
CURRENT_TIME CURRENT_TIMESTAMP LOCALTIME LOCALTIMESTAMP INSERT
`)

// niladicFunctions are reserved words that are function calls on their own,
// without parentheses.
var niladicFunctions = wordSet(`
CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP LOCALTIME LOCALTIMESTAMP
`)

func wordSet(s string) map[string]bool {
	m := make(map[string]bool)
	for _, w := range strings.Fields(s) {
		m[w] = true
	}
	return m
}

// IsReserved reports whether word (any case) is a reserved word, which
// needs back quotes to be used as an identifier.
func IsReserved(word string) bool { return reserved[strings.ToUpper(word)] }

// IsFunctionKeyword reports whether the reserved word may name a function
// when followed by '('.
func IsFunctionKeyword(word string) bool { return functionKeywords[strings.ToUpper(word)] }

// IsNiladicFunction reports whether the reserved word is a function call
// without parentheses (CURRENT_TIMESTAMP).
func IsNiladicFunction(word string) bool { return niladicFunctions[strings.ToUpper(word)] }

// QuoteIdent returns name as it must be written in SQL: bare when it is a
// plain word that is no keyword, otherwise in back quotes with embedded back
// quotes doubled.
func QuoteIdent(name string) string {
	if isPlainWord(name) && !reserved[strings.ToUpper(name)] && !keywords[strings.ToUpper(name)] {
		return name
	}
	return "`" + strings.ReplaceAll(name, "`", "``") + "`"
}

// specialCalls are names the parser reads with special argument syntax
// (TRIM(x FROM y)) or turns into another node (SUBSTRING(x, 1) is a
// Substring). A Call with such a name can only come from a quoted name, so
// it is printed quoted.
var specialCalls = wordSet(`
CAST TRY_CAST EXTRACT TRIM SUBSTRING POSITION DESCRIPTOR
`)

// quoteFuncName is QuoteIdent, except that function names that are
// keywords but parse as plain calls stay bare.
func quoteFuncName(name string) string {
	u := strings.ToUpper(name)
	if isPlainWord(name) && !specialCalls[u] && (functionKeywords[u] || !reserved[u]) {
		return name
	}
	return QuoteIdent(name)
}

// isPlainWord reports whether s lexes as one unquoted word: an ASCII letter
// or underscore, then letters, digits, underscores or '$'.
func isPlainWord(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '_':
		case i > 0 && (c >= '0' && c <= '9' || c == '$'):
		default:
			return false
		}
	}
	return true
}
