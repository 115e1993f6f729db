"""Reports: the data of each figure, the figures, the HTML page."""
