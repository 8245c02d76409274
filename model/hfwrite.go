package model

// The Hugging Face config.json of a shape and its tokenizer (whose own files package
// tokenizer writes), which the tiny models and GGUF -> HF conversion write.

import "github.com/umad-dev/umad/tokenizer"

func hfConfigOf(s Shape, tok *tokenizer.HF) HFConfig {
	bos := tok.BOS
	c := HFConfig{
		VocabSize:             s.Vocab,
		HiddenSize:            s.Hidden,
		IntermediateSize:      s.FFN,
		NumHiddenLayers:       s.Layers,
		NumAttentionHeads:     s.Heads,
		NumKeyValueHeads:      s.KVHeads,
		MaxPositionEmbeddings: s.Context,
		RMSNormEps:            s.RMSEps,
		RopeTheta:             s.RopeTheta,
		RopeScaling:           s.RopeScaling,
		TieWordEmbeddings:     s.TiedEmbeddings,
		BOSTokenID:            &bos,
		EOSTokenID:            TokenIDs{tok.EOS},
		TorchDType:            "float32",
	}
	d, _ := s.Arch.desc()
	c.ModelType, c.Architectures, c.HiddenAct = d.HFModelType(), []string{d.HFClass}, d.Activation
	if d.SlidingWindowPattern > 0 {
		c.HiddenAct, c.HiddenActivation = "", d.Activation
		c.SlidingWindow, c.SlidingWindowPattern = &s.SlidingWindow, d.SlidingWindowPattern
		q := s.QueryScalar
		if q == 0 {
			q = float64(s.HeadDim)
		}
		c.RopeLocalBaseFreq, c.QueryPreAttnScalar = d.LocalRopeTheta, &q
		for i := range s.Layers {
			c.LayerTypes = append(c.LayerTypes, layerType(d, i))
		}
	}
	if d.ConfigHeadDim {
		noBias := false
		c.HeadDim, c.AttentionBias = s.HeadDim, &noBias
	}
	return c
}
