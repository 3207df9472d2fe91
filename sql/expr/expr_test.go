package expr

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/clinkstream/clink/sql/parser"
	"github.com/clinkstream/clink/sql/types"
)

// testScope is a Nexmark-like bid table plus columns of every family; nb
// (INT) and ns (STRING) are always NULL.
var testScope = NewTable("bid",
	types.Field{Name: "auction", Type: types.BigIntType.WithNotNull(true)},
	types.Field{Name: "price", Type: types.BigIntType},
	types.Field{Name: "channel", Type: types.StringType},
	types.Field{Name: "dateTime", Type: types.TimestampOf(3)},
	types.Field{Name: "nb", Type: types.IntType},
	types.Field{Name: "ns", Type: types.StringType},
	types.Field{Name: "d", Type: types.DecimalOf(10, 2)},
	types.Field{Name: "f", Type: types.DoubleType},
	types.Field{Name: "b", Type: types.BooleanType},
	types.Field{Name: "ltz", Type: types.TimestampLTZOf(3)},
	types.Field{Name: "dt", Type: types.DateType},
	types.Field{Name: "i", Type: types.IntType},
)

var testRow = []types.Value{
	types.Int64(1001), types.Int64(100), types.String("Google"), types.Timestamp(1436918401000, 0, 3),
	types.Null, types.Null, types.Decimal(1250, 10, 2), types.Float64(2.5), types.Bool(true),
	types.TimestampLTZ(1436918401000, 0, 3), types.Date(16631), types.Int32(7),
}

type exprCase struct {
	expr string
	// want is "TYPE | value" or "error: substring".
	want string
}

func runCases(t *testing.T, c *Compiler, cases []exprCase) {
	t.Helper()
	for _, tc := range cases {
		e, err := parser.ParseExpr(tc.expr)
		if err != nil {
			t.Errorf("%s: parsing: %v", tc.expr, err)
			continue
		}
		compiled, err := c.Compile(e, testScope)
		var got string
		if err == nil {
			var v types.Value
			v, err = compiled.Eval(testRow)
			if err == nil {
				got = compiled.Type.String() + " | " + string(v.AppendFormat(nil, c.Location))
			}
		}
		if err != nil {
			got = "error: " + err.Error()
			if strings.HasPrefix(tc.want, "error: ") && strings.Contains(got, strings.TrimPrefix(tc.want, "error: ")) {
				continue
			}
		}
		if got != tc.want {
			t.Errorf("%s\n got: %s\nwant: %s", tc.expr, got, tc.want)
		}
	}
}

func TestArithmetic(t *testing.T) {
	runCases(t, &Compiler{}, []exprCase{
		{"1 + 2", "INT NOT NULL | 3"},
		{"2147483647 + 1", "INT NOT NULL | -2147483648"}, // wraps as Java int
		{"2147483648", "BIGINT NOT NULL | 2147483648"},
		{"-2147483648", "INT NOT NULL | -2147483648"},
		{"-2147483649", "BIGINT NOT NULL | -2147483649"},
		{"-9223372036854775808", "BIGINT NOT NULL | -9223372036854775808"},
		{"-9223372036854775809", "DECIMAL(19, 0) NOT NULL | -9223372036854775809"},
		{"- -5", "INT NOT NULL | 5"},
		{"99999999999999999999", "DECIMAL(20, 0) NOT NULL | 99999999999999999999"},
		{"auction + i", "BIGINT | 1008"},
		{"auction + 1", "BIGINT NOT NULL | 1002"},
		{"7 / 2", "INT NOT NULL | 3"},
		{"-7 / 2", "INT NOT NULL | -3"},
		{"-7 % 3", "INT NOT NULL | -1"},
		{"MOD(7, 3)", "INT NOT NULL | 1"},
		{"1 / 0", "error: division by zero at line 1, column 1"},
		{"price % 0", "error: division by zero"},
		{"price / nb", "BIGINT | NULL"},
		{"price + NULL", "BIGINT | NULL"},
		{"price * 0.908", "DECIMAL(23, 3) | 90.800"},
		{"0.908 * price", "DECIMAL(23, 3) | 90.800"},
		{"d + 1", "DECIMAL(13, 2) | 13.50"},
		{"d * d", "DECIMAL(21, 4) | 156.2500"},
		{"d / 3", "DECIMAL(21, 13) | 4.1666666666667"},
		{"d / 0", "error: division by zero"},
		{"d % 5", "DECIMAL(10, 2) | 2.50"},
		{"1.5 + 2.25", "DECIMAL(4, 2) NOT NULL | 3.75"},
		{"f * 2", "DOUBLE | 5.0"},
		{"f / 0", "DOUBLE | Infinity"},
		{"d + f", "DOUBLE | 15.0"},
		{"1E3", "DOUBLE NOT NULL | 1000.0"},
		{"-price", "BIGINT | -100"},
		{"-d", "DECIMAL(10, 2) | -12.50"},
		{"+f", "DOUBLE | 2.5"},
		{"'a' + 1", "error: cannot apply '+' to CHAR and INT"},
		{"ABS(-5)", "INT NOT NULL | 5"},
		{"ABS(-d)", "DECIMAL(10, 2) | 12.50"},
		{"ROUND(2.5)", "DECIMAL(2, 0) NOT NULL | 3"},
		{"ROUND(-2.5)", "DECIMAL(2, 0) NOT NULL | -3"},
		{"ROUND(d, 1)", "DECIMAL(10, 1) | 12.5"},
		{"ROUND(1.2345, 2)", "DECIMAL(4, 2) NOT NULL | 1.23"},
		{"ROUND(f)", "DOUBLE | 3.0"},
		{"ROUND(1234, -2)", "INT NOT NULL | 1200"},
		{"FLOOR(-1.5)", "DECIMAL(2, 0) NOT NULL | -2"},
		{"CEIL(1.2)", "DECIMAL(2, 0) NOT NULL | 2"},
		{"CEIL(f)", "DOUBLE | 3.0"},
		{"FLOOR(price)", "BIGINT | 100"},
		{"POWER(2, 10)", "DOUBLE NOT NULL | 1024.0"},
		{"SQRT(16)", "DOUBLE NOT NULL | 4.0"},
		{"LN(1)", "DOUBLE NOT NULL | 0.0"},
		{"LOG10(1000)", "DOUBLE NOT NULL | 3.0"},
		{"EXP(0)", "DOUBLE NOT NULL | 1.0"},
		{"SQRT(nb)", "DOUBLE | NULL"},
		{"SIGN(-3)", "INT NOT NULL | -1"},
	})
}

func TestComparisonAndLogic(t *testing.T) {
	runCases(t, &Compiler{}, []exprCase{
		{"price > 50", "BOOLEAN | TRUE"},
		{"auction = 1001", "BOOLEAN NOT NULL | TRUE"},
		{"price >= d", "BOOLEAN | TRUE"},
		{"i < f", "BOOLEAN | FALSE"},
		{"price <> nb", "BOOLEAN | NULL"},
		{"channel = 'Google'", "BOOLEAN | TRUE"},
		{"channel < 'Z'", "BOOLEAN | TRUE"},
		{"channel = 5", "error: cannot compare STRING and INT at line 1, column 1"},
		{"b = 1", "error: cannot compare BOOLEAN and INT"},
		{"dateTime > TIMESTAMP '2015-07-14 00:00:00'", "BOOLEAN | TRUE"},
		{"dateTime > '2015-07-16 00:00:00'", "BOOLEAN | FALSE"},
		{"dt = DATE '2015-07-15'", "BOOLEAN | TRUE"},
		{"dt < dateTime", "BOOLEAN | TRUE"},
		{"ltz = dateTime", "BOOLEAN | TRUE"},
		{"TRUE AND NULL", "BOOLEAN | NULL"},
		{"FALSE AND NULL", "BOOLEAN | FALSE"},
		{"TRUE OR NULL", "BOOLEAN | TRUE"},
		{"FALSE OR NULL", "BOOLEAN | NULL"},
		{"NOT NULL", "BOOLEAN | NULL"},
		{"NOT b", "BOOLEAN | FALSE"},
		{"b AND price > 1000", "BOOLEAN | FALSE"},
		{"price AND b", "error: AND needs BOOLEAN operands, not BIGINT"},
		{"price BETWEEN 50 AND 150", "BOOLEAN | TRUE"},
		{"price NOT BETWEEN 50 AND 150", "BOOLEAN | FALSE"},
		{"price BETWEEN 150 AND 50", "BOOLEAN | FALSE"},
		{"price BETWEEN SYMMETRIC 150 AND 50", "BOOLEAN | TRUE"},
		{"price BETWEEN nb AND 50", "BOOLEAN | FALSE"},
		{"price BETWEEN nb AND 150", "BOOLEAN | NULL"},
		{"price IN (1, 2, 100)", "BOOLEAN | TRUE"},
		{"price IN (1, 2)", "BOOLEAN | FALSE"},
		{"price IN (1, NULL)", "BOOLEAN | NULL"},
		{"price IN (100, NULL)", "BOOLEAN | TRUE"},
		{"price NOT IN (1, NULL)", "BOOLEAN | NULL"},
		{"nb IN (1, 2)", "BOOLEAN | NULL"},
		{"channel IN ('Apple', 'Google')", "BOOLEAN | TRUE"},
		{"price IN ('a')", "error: cannot compare BIGINT and CHAR"},
		{"nb IS NULL", "BOOLEAN NOT NULL | TRUE"},
		{"price IS NOT NULL", "BOOLEAN NOT NULL | TRUE"},
		{"b IS TRUE", "BOOLEAN NOT NULL | TRUE"},
		{"(nb > 1) IS FALSE", "BOOLEAN NOT NULL | FALSE"},
		{"(nb > 1) IS NOT FALSE", "BOOLEAN NOT NULL | TRUE"},
		{"(nb > 1) IS UNKNOWN", "BOOLEAN NOT NULL | TRUE"},
		{"nb IS DISTINCT FROM NULL", "BOOLEAN NOT NULL | FALSE"},
		{"price IS DISTINCT FROM nb", "BOOLEAN NOT NULL | TRUE"},
		{"price IS NOT DISTINCT FROM 100", "BOOLEAN NOT NULL | TRUE"},
		{"f = f", "BOOLEAN | TRUE"},
		{"CAST('NaN' AS DOUBLE) = CAST('NaN' AS DOUBLE)", "BOOLEAN NOT NULL | FALSE"},
		{"CAST('NaN' AS DOUBLE) <> CAST('NaN' AS DOUBLE)", "BOOLEAN NOT NULL | TRUE"},
	})
}

func TestConditional(t *testing.T) {
	runCases(t, &Compiler{}, []exprCase{
		{"CASE WHEN price > 10 THEN 'high' ELSE 'low' END", "VARCHAR(4) NOT NULL | high"},
		{"CASE WHEN price > 1000 THEN 'high' WHEN price > 10 THEN 'mid' END", "VARCHAR(4) | mid"},
		{"CASE WHEN price > 1000 THEN 1 END", "INT | NULL"},
		{"CASE price WHEN 100 THEN 'a' WHEN 200 THEN 'b' ELSE 'c' END", "CHAR(1) NOT NULL | a"},
		{"CASE nb WHEN 1 THEN 'a' ELSE 'c' END", "CHAR(1) NOT NULL | c"},
		{"CASE WHEN nb > 1 THEN 1 ELSE 2.5 END", "DECIMAL(11, 1) NOT NULL | 2.5"},
		{"CASE WHEN b THEN 1 ELSE 'x' END", "error: cannot mix in CASE the result types INT and CHAR"},
		{"CASE WHEN price THEN 1 END", "error: WHEN needs BOOLEAN operands"},
		{"COALESCE(nb, 3)", "INT NOT NULL | 3"},
		{"COALESCE(nb, price)", "BIGINT | 100"},
		{"COALESCE(ns, channel, 'x')", "STRING NOT NULL | Google"},
		{"COALESCE(NULL, NULL)", "NULL | NULL"},
		{"NULLIF(price, 100)", "BIGINT | NULL"},
		{"NULLIF(price, 5)", "BIGINT | 100"},
		{"IF(price > 50, 'y', 'n')", "CHAR(1) NOT NULL | y"},
		{"IF(nb > 50, 'y', 'n')", "CHAR(1) NOT NULL | n"},
		{"GREATEST(1, price, 7)", "BIGINT | 100"},
		{"LEAST(1, price, nb)", "BIGINT | NULL"},
		{"IFNULL(ns, 'dflt')", "STRING NOT NULL | dflt"},
	})
}

func TestCast(t *testing.T) {
	runCases(t, &Compiler{}, []exprCase{
		{"CAST('12' AS INT)", "INT NOT NULL | 12"},
		{"CAST(' 12.7 ' AS INT)", "INT NOT NULL | 12"},
		{"CAST('abc' AS INT)", "error: cannot cast 'abc' to INT"},
		{"TRY_CAST('abc' AS INT)", "INT | NULL"},
		{"CAST('3000000000' AS INT)", "error: cannot cast '3000000000' to INT"},
		{"CAST(300 AS TINYINT)", "TINYINT NOT NULL | 44"},
		{"CAST(2.7 AS INT)", "INT NOT NULL | 2"},
		{"CAST(-2.7E0 AS BIGINT)", "BIGINT NOT NULL | -2"},
		{"CAST(price AS DOUBLE)", "DOUBLE | 100.0"},
		{"CAST(price AS DECIMAL(5, 1))", "DECIMAL(5, 1) | 100.0"},
		{"CAST(price AS DECIMAL(3, 1))", "DECIMAL(3, 1) | NULL"},
		{"CAST(1.255 AS DECIMAL(4, 2))", "DECIMAL(4, 2) | 1.26"},
		{"CAST('1.5' AS DECIMAL(4, 2))", "DECIMAL(4, 2) | 1.50"},
		{"CAST(f AS DECIMAL(4, 2))", "DECIMAL(4, 2) | 2.50"},
		{"CAST(d AS STRING)", "STRING | 12.50"},
		{"CAST(f AS STRING)", "STRING | 2.5"},
		{"CAST(1E10 AS STRING)", "STRING NOT NULL | 1.0E10"},
		{"CAST(b AS STRING)", "STRING | TRUE"},
		{"CAST('yes' AS BOOLEAN)", "BOOLEAN NOT NULL | TRUE"},
		{"CAST('0' AS BOOLEAN)", "BOOLEAN NOT NULL | FALSE"},
		{"CAST('maybe' AS BOOLEAN)", "error: cannot cast 'maybe' to BOOLEAN"},
		{"CAST(0 AS BOOLEAN)", "BOOLEAN NOT NULL | FALSE"},
		{"CAST(TRUE AS INT)", "INT NOT NULL | 1"},
		{"CAST(channel AS CHAR(8))", "CHAR(8) | Google  "},
		{"CAST(channel AS VARCHAR(3))", "VARCHAR(3) | Goo"},
		{"CAST(dateTime AS STRING)", "STRING | 2015-07-15 00:00:01.000"},
		{"CAST(dateTime AS DATE)", "DATE | 2015-07-15"},
		{"CAST(dateTime AS TIME)", "TIME(0) | 00:00:01"},
		{"CAST(dateTime AS TIMESTAMP(0))", "TIMESTAMP(0) | 2015-07-15 00:00:01"},
		{"CAST(dt AS TIMESTAMP(3))", "TIMESTAMP(3) | 2015-07-15 00:00:00.000"},
		{"CAST('2015-07-15 10:11:12.5' AS TIMESTAMP(3))", "TIMESTAMP(3) NOT NULL | 2015-07-15 10:11:12.500"},
		{"CAST('2015-07-15' AS DATE)", "DATE NOT NULL | 2015-07-15"},
		{"CAST('2015-02-30' AS DATE)", "error: cannot cast '2015-02-30' to DATE"},
		{"CAST('10:11:12' AS TIME)", "TIME(0) NOT NULL | 10:11:12"},
		{"CAST(price AS TIMESTAMP(3))", "error: cannot cast BIGINT to TIMESTAMP(3); use TO_TIMESTAMP_LTZ"},
		{"CAST(ltz AS BIGINT)", "BIGINT | 1436918401"},
		{"CAST(dateTime AS TIMESTAMP_LTZ(3))", "TIMESTAMP_LTZ(3) | 2015-07-15 00:00:01.000"},
		{"CAST(nb AS STRING)", "STRING | NULL"},
		{"CAST(NULL AS INT)", "INT | NULL"},
		{"CAST(b AS DATE)", "error: cannot cast BOOLEAN to DATE"},
		{"CAST(price AS DECIMAL(40, 2))", "error: DECIMAL precision must be between 1 and 38"},
	})
}

func TestStringFunctions(t *testing.T) {
	runCases(t, &Compiler{}, []exprCase{
		{"UPPER(channel)", "STRING | GOOGLE"},
		{"LOWER('ABC')", "CHAR(3) NOT NULL | abc"},
		{"UPPER(ns)", "STRING | NULL"},
		{"UPPER(price)", "error: function UPPER expects a character string, not BIGINT"},
		{"CHAR_LENGTH('héllo')", "INT NOT NULL | 5"},
		{"CHARACTER_LENGTH(channel)", "INT | 6"},
		{"SUBSTRING('hello' FROM 2 FOR 3)", "VARCHAR(5) NOT NULL | ell"},
		{"SUBSTRING('hello' FROM 2)", "VARCHAR(5) NOT NULL | ello"},
		{"SUBSTRING('hello', -3, 2)", "VARCHAR(5) NOT NULL | ll"},
		{"SUBSTR('hello', 0, 2)", "VARCHAR(5) NOT NULL | he"},
		{"SUBSTRING('hello' FROM 9)", "VARCHAR(5) NOT NULL | "},
		{"SUBSTRING('hello' FROM 2 FOR -1)", "VARCHAR(5) NOT NULL | "},
		{"SUBSTRING('héllo' FROM 2 FOR 2)", "VARCHAR(5) NOT NULL | él"},
		{"CONCAT('a', channel, 'b')", "STRING | aGoogleb"},
		{"CONCAT('a', ns)", "STRING | NULL"},
		{"CONCAT_WS('-', 'a', ns, 'b')", "STRING NOT NULL | a-b"},
		{"CONCAT_WS(ns, 'a', 'b')", "STRING | NULL"},
		{"'a' || channel", "STRING | aGoogle"},
		{"'ab' || 'c'", "CHAR(3) NOT NULL | abc"},
		{"channel || ns", "STRING | NULL"},
		{"TRIM('  x  ')", "STRING NOT NULL | x"},
		{"TRIM(LEADING FROM '  x  ')", "STRING NOT NULL | x  "},
		{"TRIM(TRAILING 'xy' FROM 'axyyx')", "STRING NOT NULL | a"},
		{"TRIM(BOTH 'a' FROM 'aabaa')", "STRING NOT NULL | b"},
		{"LTRIM('  x ')", "STRING NOT NULL | x "},
		{"RTRIM('  x ')", "STRING NOT NULL |   x"},
		{"REPLACE('banana', 'an', 'AN')", "STRING NOT NULL | bANANa"},
		{"REPLACE('banana', '', 'x')", "STRING NOT NULL | banana"},
		{"REGEXP_EXTRACT('foo123bar456', '[0-9]+')", "STRING | 123"},
		{"REGEXP_EXTRACT('foo123bar', '([a-z]+)([0-9]+)', 2)", "STRING | 123"},
		{"REGEXP_EXTRACT('foo', '[0-9]+')", "STRING | NULL"},
		{"REGEXP_EXTRACT('foo', '(')", "error: invalid regular expression '('"},
		{"REGEXP_REPLACE('a1b22', '([0-9]+)', '<$1>')", "STRING | a<1>b<22>"},
		{"SPLIT_INDEX('a,b,c', ',', 1)", "STRING | b"},
		{"SPLIT_INDEX('a,b,c', ',', 3)", "STRING | NULL"},
		{"SPLIT_INDEX('a::b', '::', 1)", "STRING | b"},
		{"channel LIKE 'Goo%'", "BOOLEAN | TRUE"},
		{"channel LIKE '%gle'", "BOOLEAN | TRUE"},
		{"channel LIKE '%oog%'", "BOOLEAN | TRUE"},
		{"channel LIKE 'G_ogle'", "BOOLEAN | TRUE"},
		{"channel LIKE 'g%'", "BOOLEAN | FALSE"},
		{"channel NOT LIKE 'g%'", "BOOLEAN | TRUE"},
		{"'a%b' LIKE 'a!%b' ESCAPE '!'", "BOOLEAN NOT NULL | TRUE"},
		{"'axb' LIKE 'a!%b' ESCAPE '!'", "BOOLEAN NOT NULL | FALSE"},
		{"'aaab' LIKE '%a%b'", "BOOLEAN NOT NULL | TRUE"},
		{"'é' LIKE '_'", "BOOLEAN NOT NULL | TRUE"},
		{"ns LIKE 'a%'", "BOOLEAN | NULL"},
		{"'a' LIKE 'a!' ESCAPE '!'", "error: invalid escape sequence"},
		{"POSITION('gl' IN channel)", "INT | 4"},
		{"POSITION('zz' IN channel)", "INT | 0"},
		{"LOCATE('o', channel, 3)", "INT | 3"},
		{"INITCAP('hello wORLD')", "STRING NOT NULL | Hello World"},
		{"LPAD('7', 3, '0')", "STRING | 007"},
		{"RPAD('ab', 1, '0')", "STRING | a"},
		{"LEFT(channel, 2)", "STRING | Go"},
		{"RIGHT(channel, 2)", "STRING | le"},
		{"REVERSE('abc')", "STRING NOT NULL | cba"},
		{"REPEAT('ab', 3)", "STRING NOT NULL | ababab"},
		{"NOSUCH(1)", "error: no function named NOSUCH"},
		{"UPPPER('a')", "error: no function named UPPPER; did you mean 'UPPER'?"},
		{"COUNT(price)", "error: aggregate function COUNT is not allowed here"},
	})
}

func TestTimeFunctions(t *testing.T) {
	runCases(t, &Compiler{}, []exprCase{
		{"TIMESTAMP '2015-07-15 00:00:01.000'", "TIMESTAMP(3) NOT NULL | 2015-07-15 00:00:01.000"},
		{"DATE '2015-07-15'", "DATE NOT NULL | 2015-07-15"},
		{"TIME '10:11:12'", "TIME(0) NOT NULL | 10:11:12"},
		{"DATE_FORMAT(dateTime, 'yyyy-MM-dd')", "STRING | 2015-07-15"},
		{"DATE_FORMAT(dateTime, 'HH:mm')", "STRING | 00:00"},
		{"DATE_FORMAT(dateTime, 'yyyy-MM-dd HH:mm:ss.SSS')", "STRING | 2015-07-15 00:00:01.000"},
		{"DATE_FORMAT(dateTime, 'EEE, d MMM yy hh:mm a')", "STRING | Wed, 15 Jul 15 12:00 AM"},
		{"DATE_FORMAT(dateTime, '''at'' H')", "STRING | at 0"},
		{"DATE_FORMAT('2015-07-15 10:00:00', 'MM/dd')", "STRING | 07/15"},
		{"DATE_FORMAT('garbage', 'MM/dd')", "STRING | NULL"},
		{"DATE_FORMAT(dateTime, 'qq')", "error: unsupported letter 'q'"},
		{"TO_TIMESTAMP('2015-07-15 10:11:12')", "TIMESTAMP(3) | 2015-07-15 10:11:12.000"},
		{"TO_TIMESTAMP('15/07/2015 10:11', 'dd/MM/yyyy HH:mm')", "TIMESTAMP(3) | 2015-07-15 10:11:00.000"},
		{"TO_TIMESTAMP('20150715', 'yyyyMMdd')", "TIMESTAMP(3) | 2015-07-15 00:00:00.000"},
		{"TO_TIMESTAMP('nope')", "TIMESTAMP(3) | NULL"},
		{"TO_TIMESTAMP_LTZ(1436918401000, 3)", "TIMESTAMP_LTZ(3) NOT NULL | 2015-07-15 00:00:01.000"},
		{"TO_TIMESTAMP_LTZ(1436918401, 0)", "TIMESTAMP_LTZ(3) NOT NULL | 2015-07-15 00:00:01.000"},
		{"TO_TIMESTAMP_LTZ(1, 2)", "error: the precision of TO_TIMESTAMP_LTZ must be 0"},
		{"TO_DATE('2015-07-15')", "DATE | 2015-07-15"},
		{"EXTRACT(YEAR FROM dateTime)", "BIGINT | 2015"},
		{"EXTRACT(MONTH FROM dt)", "BIGINT | 7"},
		{"EXTRACT(DOW FROM dt)", "BIGINT | 4"},
		{"EXTRACT(DOY FROM dt)", "BIGINT | 196"},
		{"EXTRACT(WEEK FROM dt)", "BIGINT | 29"},
		{"EXTRACT(QUARTER FROM dt)", "BIGINT | 3"},
		{"EXTRACT(SECOND FROM dateTime)", "BIGINT | 1"},
		{"EXTRACT(MILLISECOND FROM TIMESTAMP '2020-01-01 00:00:05.123')", "BIGINT NOT NULL | 5123"},
		{"EXTRACT(EPOCH FROM dateTime)", "BIGINT | 1436918401"},
		{"EXTRACT(HOUR FROM dt)", "error: cannot extract HOUR from DATE"},
		{"HOUR(TIMESTAMP '2020-01-01 13:05:00')", "BIGINT NOT NULL | 13"},
		{"DAYOFMONTH(dt)", "BIGINT | 15"},
		{"FLOOR(dateTime TO HOUR)", "TIMESTAMP(3) | 2015-07-15 00:00:00.000"},
		{"CEIL(dateTime TO HOUR)", "TIMESTAMP(3) | 2015-07-15 01:00:00.000"},
		{"FLOOR(dateTime TO MONTH)", "TIMESTAMP(3) | 2015-07-01 00:00:00.000"},
		{"CEIL(dateTime TO YEAR)", "TIMESTAMP(3) | 2016-01-01 00:00:00.000"},
		{"FLOOR(dateTime TO WEEK)", "TIMESTAMP(3) | 2015-07-13 00:00:00.000"},
		{"FLOOR(dt TO MONTH)", "DATE | 2015-07-01"},
		{"dateTime - INTERVAL '5' SECOND", "TIMESTAMP(3) | 2015-07-14 23:59:56.000"},
		{"dateTime + INTERVAL '1 02:03:04.5' DAY TO SECOND", "TIMESTAMP(3) | 2015-07-16 02:03:05.500"},
		{"dateTime + INTERVAL '1' MONTH", "TIMESTAMP(3) | 2015-08-15 00:00:01.000"},
		{"DATE '2015-01-31' + INTERVAL '1' MONTH", "DATE NOT NULL | 2015-02-28"},
		{"INTERVAL '1' HOUR + dateTime", "TIMESTAMP(3) | 2015-07-15 01:00:01.000"},
		{"INTERVAL '2:30' HOUR TO MINUTE", "INTERVAL DAY TO SECOND NOT NULL | +0 02:30:00.000"},
		{"INTERVAL '1-6' YEAR TO MONTH", "INTERVAL YEAR TO MONTH NOT NULL | +1-06"},
		{"INTERVAL '10' SECOND * 3", "INTERVAL DAY TO SECOND NOT NULL | +0 00:00:30.000"},
		{"ltz + INTERVAL '1' DAY", "TIMESTAMP_LTZ(3) | 2015-07-16 00:00:01.000"},
		{"dateTime - dateTime", "error: cannot apply '-' to TIMESTAMP and TIMESTAMP"},
		{"TIMESTAMPDIFF(MINUTE, TIMESTAMP '2020-01-01 00:00:00', TIMESTAMP '2020-01-01 01:30:00')", "INT NOT NULL | 90"},
		{"TIMESTAMPDIFF(MONTH, DATE '2020-01-31', DATE '2020-03-30')", "INT NOT NULL | 1"},
		{"TIMESTAMPADD(HOUR, 2, dateTime)", "TIMESTAMP(3) | 2015-07-15 02:00:01.000"},
		{"FROM_UNIXTIME(0)", "STRING NOT NULL | 1970-01-01 00:00:00"},
		{"UNIX_TIMESTAMP('1970-01-01 00:01:00')", "BIGINT | 60"},
	})
}

func TestSessionTimeZone(t *testing.T) {
	loc, err := time.LoadLocation("Asia/Shanghai")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	runCases(t, &Compiler{Location: loc}, []exprCase{
		{"ltz", "TIMESTAMP_LTZ(3) | 2015-07-15 08:00:01.000"},
		{"CAST(ltz AS STRING)", "STRING | 2015-07-15 08:00:01.000"},
		{"CAST(ltz AS TIMESTAMP(3))", "TIMESTAMP(3) | 2015-07-15 08:00:01.000"},
		{"CAST(dateTime AS TIMESTAMP_LTZ(3))", "TIMESTAMP_LTZ(3) | 2015-07-15 00:00:01.000"},
		{"EXTRACT(HOUR FROM ltz)", "BIGINT | 8"},
		{"DATE_FORMAT(ltz, 'HH:mm Z')", "STRING | 08:00 +0800"},
		{"TO_TIMESTAMP_LTZ(0, 3)", "TIMESTAMP_LTZ(3) NOT NULL | 1970-01-01 08:00:00.000"},
		{"FLOOR(ltz TO DAY)", "TIMESTAMP_LTZ(3) | 2015-07-15 00:00:00.000"},
		{"FROM_UNIXTIME(0)", "STRING NOT NULL | 1970-01-01 08:00:00"},
	})
}

func TestScopeErrors(t *testing.T) {
	join := Tables{
		{Name: "a", Columns: []types.Field{{Name: "id", Type: types.IntType}, {Name: "price", Type: types.IntType}}},
		{Name: "b", Offset: 2, Columns: []types.Field{{Name: "id", Type: types.IntType}, {Name: "name", Type: types.StringType}}},
	}
	for _, tc := range []struct{ expr, want string }{
		{"pricee", "column 'pricee' not found in any table of the FROM clause; did you mean 'price'? at line 1, column 1"},
		{"id", "column reference 'id' is ambiguous; it could be a.id or b.id at line 1, column 1"},
		{"c.id", "table 'c' not found; did you mean 'a' or 'b'? at line 1, column 1"},
		{"a.nme", "column 'nme' not found in table 'a' at line 1, column 1"},
		{"b.nme", "column 'nme' not found in table 'b'; did you mean 'name'? at line 1, column 1"},
		{"1 +\n  xyz", "column 'xyz' not found in any table of the FROM clause at line 2, column 3"},
	} {
		e, err := parser.ParseExpr(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		_, err = Compile(e, join)
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got: %v\nwant: %s", tc.expr, err, tc.want)
		}
	}
	e, _ := parser.ParseExpr("b.id + a.price")
	c, err := Compile(e, join)
	if err != nil {
		t.Fatal(err)
	}
	v, _ := c.Eval([]types.Value{types.Int32(1), types.Int32(10), types.Int32(5), types.String("x")})
	if v.Int64() != 15 {
		t.Fatalf("b.id + a.price = %v", v)
	}
}

func TestDeterminism(t *testing.T) {
	clock := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &Compiler{Now: func() time.Time { return clock }}
	for _, tc := range []struct {
		expr          string
		deterministic bool
		constant      bool
	}{
		{"1 + 2", true, true},
		{"price + 1", true, false},
		{"CURRENT_TIMESTAMP", false, false},
		{"CAST(CURRENT_TIMESTAMP AS STRING)", false, false},
		{"PROCTIME()", false, false},
	} {
		e, _ := parser.ParseExpr(tc.expr)
		comp, err := c.Compile(e, testScope)
		if err != nil {
			t.Fatal(err)
		}
		if comp.Deterministic != tc.deterministic || comp.Constant != tc.constant {
			t.Errorf("%s: deterministic %v constant %v", tc.expr, comp.Deterministic, comp.Constant)
		}
	}
	runCases(t, c, []exprCase{
		{"CURRENT_TIMESTAMP", "TIMESTAMP_LTZ(3) NOT NULL | 2020-01-02 03:04:05.000"},
		{"LOCALTIMESTAMP", "TIMESTAMP(3) NOT NULL | 2020-01-02 03:04:05.000"},
		{"CURRENT_DATE", "DATE NOT NULL | 2020-01-02"},
		{"NOW()", "TIMESTAMP_LTZ(3) NOT NULL | 2020-01-02 03:04:05.000"},
		{"PROCTIME()", "TIMESTAMP_LTZ(3) NOT NULL | 2020-01-02 03:04:05.000"},
		{"PROCTIME(1)", "error: function PROCTIME takes 0 argument(s), got 1"},
	})
}

func TestUDF(t *testing.T) {
	reg := NewRegistry()
	countChar := ScalarFunction{
		Args:   []types.Type{types.StringType, types.StringType},
		Result: types.BigIntType.WithNotNull(true),
		Strict: true,
		Eval: func(args []types.Value) (types.Value, error) {
			return types.Int64(int64(strings.Count(args[0].Str(), args[1].Str()))), nil
		},
	}
	if err := reg.RegisterScalar("count_char", countChar); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterScalar("COUNT_CHAR", countChar); err == nil {
		t.Fatal("registered a name twice")
	}
	if err := reg.RegisterScalar("upper", countChar); err == nil {
		t.Fatal("shadowed a built-in function")
	}
	runCases(t, &Compiler{Functions: reg}, []exprCase{
		{"count_char(channel, 'o')", "BIGINT | 2"},
		{"count_char('abc', 'c')", "BIGINT NOT NULL | 1"},
		{"count_char(ns, 'o')", "BIGINT | NULL"},
		{"count_char(channel)", "error: function takes 2 argument(s), got 1"},
		{"count_char(price, 'o')", "error: argument 1 must be STRING, not BIGINT"},
	})
}

func TestRowFieldAccess(t *testing.T) {
	bidType := types.RowOf(
		types.Field{Name: "auction", Type: types.BigIntType.WithNotNull(true)},
		types.Field{Name: "price", Type: types.BigIntType},
		types.Field{Name: "at", Type: types.RowOf(types.Field{Name: "ts", Type: types.TimestampOf(3)})},
	)
	scope := Tables{{Name: "datagen", Columns: []types.Field{
		{Name: "event_type", Type: types.IntType},
		{Name: "bid", Type: bidType},
		{Name: "nb", Type: bidType.WithNotNull(true)},
	}}}
	inner := types.RowValue([]types.Value{types.Timestamp(1436918401000, 0, 3)})
	set := []types.Value{types.Int32(2), types.RowValue([]types.Value{types.Int64(1001), types.Int64(7), inner}),
		types.RowValue([]types.Value{types.Int64(5), types.Null, types.NullOf(types.KindRow)})}
	null := []types.Value{types.Int32(0), types.NullOf(types.KindRow), set[2]}
	for _, tc := range []struct{ expr, typ, onSet, onNull string }{
		{"bid.auction", "BIGINT", "1001", "NULL"}, // nullable: the ROW may be NULL
		{"datagen.bid.price * 2", "BIGINT", "14", "NULL"},
		{"bid.at.ts", "TIMESTAMP(3)", "2015-07-15 00:00:01.000", "NULL"},
		{"nb.auction", "BIGINT NOT NULL", "5", "5"},
		{"nb.at.ts", "TIMESTAMP(3)", "NULL", "NULL"},
		{"CASE WHEN event_type = 2 THEN bid.price END", "BIGINT", "7", "NULL"},
	} {
		e, err := parser.ParseExpr(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compile(e, scope)
		if err != nil {
			t.Errorf("%s: %v", tc.expr, err)
			continue
		}
		if got := c.Type.String(); got != tc.typ {
			t.Errorf("%s: type %s, want %s", tc.expr, got, tc.typ)
		}
		for _, r := range []struct {
			row  []types.Value
			want string
		}{{set, tc.onSet}, {null, tc.onNull}} {
			v, err := c.Eval(r.row)
			if err != nil {
				t.Errorf("%s: %v", tc.expr, err)
			} else if got := string(v.AppendFormat(nil, nil)); got != r.want {
				t.Errorf("%s on %v = %s, want %s", tc.expr, r.row, got, r.want)
			}
		}
	}
	for _, tc := range []struct{ expr, want string }{
		{"bid.pricee", "field 'pricee' not found in ROW 'bid'; did you mean 'price'? at line 1, column 1"},
		{"datagen.bid.xyzzy", "field 'xyzzy' not found in ROW 'datagen.bid' at line 1, column 1"},
		{"bid.price.x", "'bid.price' is BIGINT, not a ROW: it has no field 'x' at line 1, column 1"},
		{"event_type.x", "table 'event_type' not found at line 1, column 1"},
	} {
		e, err := parser.ParseExpr(tc.expr)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Compile(e, scope); err == nil || err.Error() != tc.want {
			t.Errorf("%s:\n got: %v\nwant: %s", tc.expr, err, tc.want)
		}
	}
}

// TestColumnConstantComparison checks the comparisons of a plain integer
// column with a constant (evaluated by one function) against the same
// comparisons of a computed operand, on either side, with NULLs.
func TestColumnConstantComparison(t *testing.T) {
	eval := func(text string) string {
		t.Helper()
		e, err := parser.ParseExpr(text)
		if err != nil {
			t.Fatalf("%s: parsing: %v", text, err)
		}
		c, err := Compile(e, testScope)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		v, err := c.Eval(testRow)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		return c.Type.String() + " | " + string(v.AppendFormat(nil, time.UTC))
	}
	for _, col := range []string{"price", "auction", "nb", "i"} {
		for _, op := range []string{"=", "<>", "<", "<=", ">", ">="} {
			for _, k := range []string{"99", "100", "101", "1001", "-5", "CAST(NULL AS BIGINT)"} {
				for _, f := range []string{"%s %s %s", "%[3]s %[2]s %[1]s"} {
					fast := fmt.Sprintf(f, col, op, k)
					slow := fmt.Sprintf(f, "("+col+" + 0)", op, k)
					if got, want := eval(fast), eval(slow); got != want {
						t.Errorf("%s = %s, want %s (as %s)", fast, got, want, slow)
					}
				}
			}
		}
	}
	if got, want := eval("dt > DATE '2015-07-14'"), "BOOLEAN | TRUE"; got != want {
		t.Errorf("dt > DATE '2015-07-14' = %s, want %s", got, want)
	}
	if got, want := eval("DATE '2015-07-16' <= dt"), "BOOLEAN | FALSE"; got != want {
		t.Errorf("DATE '2015-07-16' <= dt = %s, want %s", got, want)
	}
}

// TestColumn checks which expressions report a plain column.
func TestColumn(t *testing.T) {
	for text, want := range map[string]int{"price": 1, "`dateTime`": 3, "i": 11, "price + 0": -1, "CAST(i AS BIGINT)": -1, "1": -1} {
		e, err := parser.ParseExpr(text)
		if err != nil {
			t.Fatal(err)
		}
		c, err := Compile(e, testScope)
		if err != nil {
			t.Fatalf("%s: %v", text, err)
		}
		i, ok := c.Column()
		if !ok {
			i = -1
		}
		if i != want {
			t.Errorf("%s: Column() = %d, %v; want %d", text, i, ok, want)
		}
	}
}
