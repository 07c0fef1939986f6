package index

import (
	"reflect"
	"testing"
)

func TestTokenize(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, World!", []string{"hello", "world"}},
		{"  e-mail: foo_bar@example.com ", []string{"e", "mail", "foo", "bar", "example", "com"}},
		{"2024 release v2.1", []string{"2024", "release", "v2", "1"}},
		{"Straße STRASSE", []string{"strasse", "strasse"}},
		{"ÉCOLE école Ecole", []string{"école", "école", "ecole"}},
		{"Ｆｕｌｌｗｉｄｔｈ １２３", []string{"fullwidth", "123"}},
		{"ﬁne", []string{"fine"}},
		{"Привет, МИР", []string{"привет", "мир"}},
		{"Γειά σου Κόσμε ΣΟΦΟΣ", []string{"γειά", "σου", "κόσμε", "σοφοσ"}},
		{"नमस्ते दुनिया", []string{"नमस्ते", "दुनिया"}},
		{"مرحبا بالعالم", []string{"مرحبا", "بالعالم"}},
		{"東京タワーへ行く", []string{"東", "京", "タ", "ワ", "ー", "へ", "行", "く"}},
		{"안녕하세요 세계", []string{"안녕하세요", "세계"}},
		{"١٢٣ ٤٥", []string{"١٢٣", "٤٥"}}, // digits of any script, kept as written
		{"emoji 🙂 here", []string{"emoji", "here"}},
		{"tab\tnew\nline", []string{"tab", "new", "line"}},
	}
	for _, tc := range tests {
		var got []string
		for i, tok := range Tokenize(tc.in) {
			if tok.Pos != i {
				t.Errorf("%q: token %d has position %d", tc.in, i, tok.Pos)
			}
			got = append(got, tok.Term)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("Tokenize(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
