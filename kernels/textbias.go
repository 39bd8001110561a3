package kernels

import "math"

// An untrained transformer writes noise. To make demo output read as text, the output
// head gets two fixed biases that stand in for training: a unigram bias that rules out
// control bytes, non-ASCII bytes, BOS and padding, and a bigram bias, the log-probability
// of the next byte given the previous one, counted on the short English text below.
// Both are constants of the model (no per-request state), so batch invariance and
// determinism are untouched. EOS follows a sentence-ending period now and then, so greedy
// requests sometimes finish with "stop".

const biasCorpus = `The river runs past the old mill and under the stone bridge, where the children
wait for the boats to come in. In the morning the fishermen check their nets, and by noon
the market is full of voices. Nobody is in a hurry here. A letter takes three days to
arrive, and the answer takes three more, and that is thought to be quite fast enough.
When the rain comes, it comes from the west, over the hills, and the whole valley turns
green within a week. The school has one room and one teacher, who also plays the organ on
Sundays and keeps bees behind the church. She says the bees are better students than the
children, since they never forget the way home. Every summer the town holds a fair. There
are games, music, bread baked in the square, and a race that nobody has won twice. This
year a girl from the farm on the hill ran the whole course with a goat following her,
and the judges could not decide whether the goat should share the prize. In the end they
gave it a ribbon of its own. Later, when the lamps were lit and the music had stopped,
people walked home slowly, talking about the weather, the harvest, and the goat.
`

// Bias weights, tuned by eye and by the EOS rate (TestTinyRefOutputIsText logs it).
const (
	bigramWeight  = 1.0
	biasFloor     = -12 // bytes that never appear in text
	eosAfterPoint = 0.15
)

// outputBias is the unigram bias: 0 for bytes that occur in text, biasFloor for control
// bytes, bytes ≥ 0x7f, BOS and padding. EOS gets its weight from the bigram table.
func outputBias(vocab int) []float32 {
	bias := make([]float32, vocab)
	for i := range bias {
		switch {
		case i == '\n' || (i >= ' ' && i < 0x7f) || i == TokenEOS:
		default:
			bias[i] = biasFloor
		}
	}
	return bias
}

// bigramBias builds the table of log P(next | prev) with add-0.05 smoothing over the
// printable bytes. Row NumByteTokens is used after BOS and any byte not seen in the
// corpus: the unigram distribution.
func bigramBias(vocab int) []float32 {
	const rows = NumByteTokens + 1
	counts := make([]float64, rows*vocab)
	text := biasCorpus
	prev := rows - 1
	for i := 0; i < len(text); i++ {
		c := int(text[i])
		counts[prev*vocab+c]++
		counts[(rows-1)*vocab+c]++
		prev = c
	}
	// End of text may follow a period.
	counts['.'*vocab+TokenEOS] = eosAfterPoint * counts['.'*vocab+' ']
	table := make([]float32, rows*vocab)
	for r := 0; r < rows; r++ {
		row := counts[r*vocab : (r+1)*vocab]
		var total float64
		for _, v := range row {
			total += v
		}
		if total == 0 {
			copy(row, counts[(rows-1)*vocab:rows*vocab])
			total = 0
			for _, v := range row {
				total += v
			}
		}
		for id := range row {
			const smooth = 0.05
			p := (row[id] + smooth) / (total + smooth*float64(vocab))
			table[r*vocab+id] = float32(max(bigramWeight*math.Log(p), biasFloor))
		}
	}
	return table
}

// bigramRow returns the bias row for the token after prev.
func (m *TinyRef) bigramRow(prev int) []float32 {
	r := NumByteTokens
	if prev >= 0 && prev < NumByteTokens {
		r = prev
	}
	return m.bigram[r*m.vocab : (r+1)*m.vocab]
}
