"""`logwatch report`: a post-mortem as one self-contained HTML file (inline SVG charts)."""
