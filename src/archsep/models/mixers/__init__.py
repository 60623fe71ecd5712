"""The token mixers of the pre-LN block stack (`stack.MixerStack`), one architecture per file:
each defines a `Mixer` (a parallel form and a step form) and a registered config that builds a
`MixerStack` of them. `archsep.models` imports every one (that registers them)."""
