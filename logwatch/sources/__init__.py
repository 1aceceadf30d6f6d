"""Where lines come from: opening streams (sniffing, decompression), framing bytes into lines,
following live files and watching their folders."""
