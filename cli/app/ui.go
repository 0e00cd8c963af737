package app

import (
	"fmt"
	"io"
	"strings"
)

// spinner redraws one status line on a terminal. On anything else it draws
// nothing: the caller prints plain lines instead, so logs and pipes never
// fill with carriage returns.
type spinner struct {
	w     io.Writer
	tty   bool
	frame int
	shown bool
}

func newSpinner(w io.Writer, tty bool) *spinner { return &spinner{w: w, tty: tty} }

// spinnerFrames are braille dots, as most terminal tools use.
const spinnerFrames = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"

func (s *spinner) draw(text string) {
	if !s.tty {
		return
	}
	frames := []rune(spinnerFrames)
	f := frames[s.frame%len(frames)]
	s.frame++
	// \r back to column 0, ESC[2K erase the line, then redraw.
	fmt.Fprintf(s.w, "\r\x1b[2K%c %s", f, text)
	s.shown = true
}

func (s *spinner) clear() {
	if !s.tty || !s.shown {
		return
	}
	fmt.Fprint(s.w, "\r\x1b[2K")
	s.shown = false
}

// prompt asks on stderr and reads one line from stdin until check accepts
// it. End of input without an answer is a usage error naming the flag, so a
// closed stdin never loops.
func (a *app) prompt(question, flag string, check func(string) error) (string, error) {
	for {
		fmt.Fprintf(a.o.Stderr, "%s: ", question)
		line, err := a.in.ReadString('\n')
		line = strings.TrimSpace(line)
		if err != nil && line == "" {
			fmt.Fprintln(a.o.Stderr)
			return "", &usageError{msg: "no answer for --" + flag}
		}
		if cerr := check(line); cerr != nil {
			fmt.Fprintf(a.o.Stderr, "  %v\n", cerr)
			if err != nil {
				return "", &usageError{msg: fmt.Sprintf("--%s: %v", flag, cerr)}
			}
			continue
		}
		return line, nil
	}
}

// confirm asks a yes/no question; def is the answer to an empty line.
func (a *app) confirm(question string, def bool) bool {
	opts := "[y/N]"
	if def {
		opts = "[Y/n]"
	}
	for {
		fmt.Fprintf(a.o.Stderr, "%s %s ", question, opts)
		line, err := a.in.ReadString('\n')
		switch strings.ToLower(strings.TrimSpace(line)) {
		case "":
			if err != nil {
				fmt.Fprintln(a.o.Stderr)
				return false
			}
			return def
		case "y", "yes":
			return true
		case "n", "no":
			return false
		}
		if err != nil {
			return false
		}
		fmt.Fprintln(a.o.Stderr, "  answer y or n")
	}
}
