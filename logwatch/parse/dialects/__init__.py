"""The dialect table: what each trainer family prints, as patterns and the fields they fill.

One module per family. `generic` holds the keys every trainer may print (the training loss,
gradient norm, learning rate, step, epoch in their common spellings: Hugging Face, torchtitan,
fairseq, DeepSpeed and ESPnet lines are read by these) and the words that mark a line as not
training; the others what their family alone prints. The general path (`parse.general`) runs
them in priority order; the line shapes (`parse.shapes`) cut the commonest lines by position.
The forms they accept come from real logs: see tests/data/dialects.toml and
samples/trainers/SOURCES.md.
"""
