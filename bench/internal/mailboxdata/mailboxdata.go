// Package mailboxdata generates the MailboxDB messages data set of the
// Espresso paper: deterministic mailbox message metadata, the same for
// every system and benchmark that loads it (bench/mailbox, bench/bulk).
package mailboxdata

import (
	"fmt"
	"math/rand/v2"
	"strings"
)

// Message is the document of the benchmark: realistic mailbox message
// metadata, 39 fields, of which four are indexed (body as text; isInbox,
// createdOn and senderId as attributes). The key (mailboxId, messageId) is
// not part of the record; each system keeps it beside the document.
type Message struct {
	ThreadID        string   `json:"threadId"`
	ConversationID  int64    `json:"conversationId"`
	SenderID        string   `json:"senderId"`
	SenderName      string   `json:"senderName"`
	SenderEmail     string   `json:"senderEmail"`
	SenderTitle     string   `json:"senderTitle"`
	RecipientID     string   `json:"recipientId"`
	RecipientName   string   `json:"recipientName"`
	RecipientEmail  string   `json:"recipientEmail"`
	CCIDs           []string `json:"ccIds"`
	Subject         string   `json:"subject"`
	Body            string   `json:"body"`
	Snippet         string   `json:"snippet"`
	Folder          string   `json:"folder"`
	Labels          []string `json:"labels"`
	IsInbox         bool     `json:"isInbox"`
	IsRead          bool     `json:"isRead"`
	IsStarred       bool     `json:"isStarred"`
	IsArchived      bool     `json:"isArchived"`
	IsDeleted       bool     `json:"isDeleted"`
	IsSpam          bool     `json:"isSpam"`
	IsDraft         bool     `json:"isDraft"`
	HasAttachments  bool     `json:"hasAttachments"`
	AttachmentCount int32    `json:"attachmentCount"`
	AttachmentBytes int64    `json:"attachmentBytes"`
	Priority        int32    `json:"priority"`
	CreatedOn       int64    `json:"createdOn"`
	SentOn          int64    `json:"sentOn"`
	ReceivedOn      int64    `json:"receivedOn"`
	ReadOn          int64    `json:"readOn"`
	UpdatedOn       int64    `json:"updatedOn"`
	MessageType     string   `json:"messageType"`
	Locale          string   `json:"locale"`
	SizeBytes       int64    `json:"sizeBytes"`
	ReplyToID       int64    `json:"replyToId"`
	InReplyToID     int64    `json:"inReplyToId"`
	ClientIP        string   `json:"clientIp"`
	UserAgent       string   `json:"userAgent"`
	Version         int32    `json:"version"`
}

// Schema is the Doppio table definition of Message: the same 39
// fields, four of them indexed.
const Schema = `{
  "key": [
    {"name": "mailboxId", "type": "string"},
    {"name": "messageId", "type": "long"}
  ],
  "schema": {
    "type": "record", "name": "Message", "namespace": "com.example.mailboxbench",
    "fields": [
      {"name": "threadId", "type": "string"},
      {"name": "conversationId", "type": "long"},
      {"name": "senderId", "type": "string", "index": "attribute"},
      {"name": "senderName", "type": "string"},
      {"name": "senderEmail", "type": "string"},
      {"name": "senderTitle", "type": "string"},
      {"name": "recipientId", "type": "string"},
      {"name": "recipientName", "type": "string"},
      {"name": "recipientEmail", "type": "string"},
      {"name": "ccIds", "type": {"type": "array", "items": "string"}, "default": []},
      {"name": "subject", "type": "string"},
      {"name": "body", "type": "string", "index": "text"},
      {"name": "snippet", "type": "string"},
      {"name": "folder", "type": "string"},
      {"name": "labels", "type": {"type": "array", "items": "string"}, "default": []},
      {"name": "isInbox", "type": "boolean", "index": "attribute"},
      {"name": "isRead", "type": "boolean"},
      {"name": "isStarred", "type": "boolean"},
      {"name": "isArchived", "type": "boolean"},
      {"name": "isDeleted", "type": "boolean"},
      {"name": "isSpam", "type": "boolean"},
      {"name": "isDraft", "type": "boolean"},
      {"name": "hasAttachments", "type": "boolean"},
      {"name": "attachmentCount", "type": "int"},
      {"name": "attachmentBytes", "type": "long"},
      {"name": "priority", "type": "int"},
      {"name": "createdOn", "type": {"type": "long", "logicalType": "timestamp-millis"}, "index": "attribute"},
      {"name": "sentOn", "type": {"type": "long", "logicalType": "timestamp-millis"}},
      {"name": "receivedOn", "type": {"type": "long", "logicalType": "timestamp-millis"}},
      {"name": "readOn", "type": "long"},
      {"name": "updatedOn", "type": {"type": "long", "logicalType": "timestamp-millis"}},
      {"name": "messageType", "type": "string"},
      {"name": "locale", "type": "string"},
      {"name": "sizeBytes", "type": "long"},
      {"name": "replyToId", "type": "long"},
      {"name": "inReplyToId", "type": "long"},
      {"name": "clientIp", "type": "string"},
      {"name": "userAgent", "type": "string"},
      {"name": "version", "type": "int"}
    ]
  }
}`

// Vocabulary is the body text's words: lowercase, no stop words, so the
// three systems' analyzers (Doppio's, Bleve's standard, PostgreSQL's
// 'simple') tokenize a body into the same terms.
var Vocabulary = strings.Fields(`
account action address agenda airport analysis answer apple april article
assistant august autumn balance banana benefit birthday board bonus booking
borrow branch breakfast budget building business cafe calendar campaign
candidate capital career carrot castle catalog ceiling chapter charity
checkout chicken client closing coffee colleague comment company concert
contract copper council course customer dashboard deadline delivery design
dinner director discount document dragon editor election engine estimate
evening expense factory feedback festival finance forest friday garden
gateway glacier guitar harbor holiday hospital hotel invoice island journal
kitchen ladder laptop launch lawyer lemon library license lunch manager
market meeting mentor migration minutes monday mountain museum network
office offer orange outage package painting parking partner payment pension
picnic pipeline planet pocket policy portfolio postcard pricing printer
project promotion proposal quarter question rabbit receipt recruiter refund
release report request research resume revenue review river roadmap rocket
salary sandwich saturday schedule school science season security seminar
server signature sprint startup station strategy student summer sunday
supplier support survey tablet teacher ticket timeline tomato training
travel tuesday umbrella update vacation vendor venue village violin
warehouse webinar wedding weekend window winter workshop yellow zebra`)

var (
	firstNames = strings.Fields("alice bob carol dave erin frank grace heidi ivan judy mallory niaj olivia peggy rupert sybil trent victor walter yara")
	lastNames  = strings.Fields("smith jones lee patel garcia kim nguyen muller rossi silva cohen novak ito okafor berg")
	titles     = []string{"Software Engineer", "Product Manager", "Recruiter", "Sales Director", "Data Scientist", "Designer", "Founder", "Account Executive"}
	folders    = []string{"inbox", "archive", "sent", "spam", "trash"}
	labelSet   = strings.Fields("work personal urgent travel finance jobs network promo")
	msgTypes   = []string{"INMAIL", "CONNECTION_INVITE", "GROUP_MESSAGE", "JOB_ALERT", "MEMBER_TO_MEMBER"}
	locales    = []string{"en_US", "en_GB", "fr_FR", "de_DE", "es_ES", "pt_BR"}
	agents     = []string{"Mozilla/5.0 (X11; Linux x86_64)", "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_5)", "LinkedIn/9.1 (iPhone; iOS 17.4)", "LinkedIn/4.1 (Android 14)"}
)

// BaseTime is createdOn of every mailbox's first loaded message
// (2024-01-01T00:00:00Z); loaded messages follow one a minute or so.
const BaseTime int64 = 1704067200000

// person is a deterministic member of the synthetic network.
func person(r *rand.Rand) (id, name, email string) {
	f, l := firstNames[r.IntN(len(firstNames))], lastNames[r.IntN(len(lastNames))]
	n := r.IntN(100000)
	return fmt.Sprintf("member%05d", n), f + " " + l, fmt.Sprintf("%s.%s%d@example.com", f, l, n%100)
}

func words(r *rand.Rand, n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(Vocabulary[r.IntN(len(Vocabulary))])
	}
	return b.String()
}

// New generates message id of mailbox mailbox created at createdOn,
// drawing every other field from r.
func New(r *rand.Rand, mailbox string, id, createdOn int64) Message {
	sid, sname, semail := person(r)
	_, rname, remail := person(r)
	body := words(r, 30+r.IntN(40))
	snippet := body
	if len(snippet) > 80 {
		snippet = snippet[:80]
	}
	folder := folders[0]
	if r.IntN(5) == 0 {
		folder = folders[1+r.IntN(len(folders)-1)]
	}
	var labels []string
	for range r.IntN(3) {
		labels = append(labels, labelSet[r.IntN(len(labelSet))])
	}
	var cc []string
	for range r.IntN(3) {
		id, _, _ := person(r)
		cc = append(cc, id)
	}
	if labels == nil {
		labels = []string{}
	}
	if cc == nil {
		cc = []string{}
	}
	attachments := int32(0)
	if r.IntN(4) == 0 {
		attachments = 1 + r.Int32N(3)
	}
	read := r.IntN(3) != 0
	readOn := int64(0)
	if read {
		readOn = createdOn + r.Int64N(86400000)
	}
	return Message{
		ThreadID:        fmt.Sprintf("%s-t%d", mailbox, id/4),
		ConversationID:  r.Int64N(1 << 40),
		SenderID:        sid,
		SenderName:      sname,
		SenderEmail:     semail,
		SenderTitle:     titles[r.IntN(len(titles))],
		RecipientID:     mailbox,
		RecipientName:   rname,
		RecipientEmail:  remail,
		CCIDs:           cc,
		Subject:         words(r, 3+r.IntN(5)),
		Body:            body,
		Snippet:         snippet,
		Folder:          folder,
		Labels:          labels,
		IsInbox:         folder == "inbox",
		IsRead:          read,
		IsStarred:       r.IntN(20) == 0,
		IsArchived:      folder == "archive",
		IsDeleted:       folder == "trash",
		IsSpam:          folder == "spam",
		IsDraft:         false,
		HasAttachments:  attachments > 0,
		AttachmentCount: attachments,
		AttachmentBytes: int64(attachments) * r.Int64N(5<<20),
		Priority:        r.Int32N(3),
		CreatedOn:       createdOn,
		SentOn:          createdOn - r.Int64N(5000),
		ReceivedOn:      createdOn,
		ReadOn:          readOn,
		UpdatedOn:       max(createdOn, readOn),
		MessageType:     msgTypes[r.IntN(len(msgTypes))],
		Locale:          locales[r.IntN(len(locales))],
		SizeBytes:       int64(len(body)) + r.Int64N(20000),
		ReplyToID:       r.Int64N(id + 1),
		InReplyToID:     r.Int64N(id + 1),
		ClientIP:        fmt.Sprintf("10.%d.%d.%d", r.IntN(256), r.IntN(256), r.IntN(256)),
		UserAgent:       agents[r.IntN(len(agents))],
		Version:         1,
	}
}

// MailboxName names mailbox i of a set.
func MailboxName(set string, i int) string { return fmt.Sprintf("%s%06d", set, i) }

// Loaded generates the n messages mailbox i of a set starts with;
// the same seed gives the same messages to every system. Message ids are
// 1..n and createdOn strictly increases with the id.
func Loaded(seed uint64, set string, i, n int) []Message {
	r := rand.New(rand.NewPCG(seed, uint64(i)<<8|uint64(set[0])))
	mb := MailboxName(set, i)
	out := make([]Message, n)
	t := BaseTime
	for j := range n {
		t += 1 + r.Int64N(120000)
		out[j] = New(r, mb, int64(j+1), t)
	}
	return out
}

// PostgresTable is the JSONB table PostgreSQL keeps the messages in:
// the key beside the document, as Doppio keeps it.
const PostgresTable = `CREATE TABLE messages (mailbox_id text NOT NULL, message_id bigint NOT NULL, doc jsonb NOT NULL, PRIMARY KEY (mailbox_id, message_id))`

// PostgresIndexes are PostgreSQL's counterparts of the four indexed
// fields: expression indexes on the JSONB, so the document stays the only
// copy of each value. The GIN index needs the btree_gin extension.
var PostgresIndexes = []string{
	`CREATE INDEX messages_inbox ON messages (mailbox_id, ((doc->>'isInbox')::boolean), ((doc->>'createdOn')::bigint) DESC)`,
	`CREATE INDEX messages_sender ON messages (mailbox_id, (doc->>'senderId'))`,
	`CREATE INDEX messages_body ON messages USING gin (mailbox_id, to_tsvector('simple', doc->>'body'))`,
}

// Record is a message as a bulk build's input line holds it: the key
// parts by name beside the document's fields.
type Record struct {
	MailboxID string `json:"mailboxId"`
	MessageID int64  `json:"messageId"`
	Message
}

// Each calls f with every message of mailboxes [0, mailboxes) of a set,
// n each, in mailbox then id order, the ids as Loaded numbers them; it
// stops at f's first error and returns it.
func Each(seed uint64, set string, mailboxes, n int, f func(Record) error) error {
	for i := range mailboxes {
		mb := MailboxName(set, i)
		for j, m := range Loaded(seed, set, i, n) {
			if err := f(Record{MailboxID: mb, MessageID: int64(j + 1), Message: m}); err != nil {
				return err
			}
		}
	}
	return nil
}
