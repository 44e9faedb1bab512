package guest_test

import (
	"fmt"
	"strings"

	"github.com/dsh-wasm/dsh-wasm/hostfns"
	"github.com/dsh-wasm/dsh-wasm/hostfns/guest"
)

// A plugin's whole setup: a static section, a variable and a tool whose
// arguments the SDK parses. Main goes in an init function of a wasip1
// c-shared main package, whose main is empty.
func Example() {
	guest.Main(func(p *guest.Plugin) error {
		if err := p.Section("shout:guide", 120, "Shout with the shout tool; it uses {{shout_mark}}."); err != nil {
			return err
		}
		if err := p.Variable("shout_mark", func(guest.Context) (string, bool, error) { return "!", true, nil }); err != nil {
			return err
		}
		return p.ToolArgs(guest.Tool{
			Name:        "shout",
			Description: "Upper-case a text.",
			Parameters:  []byte(`{"type":"object","properties":{"text":{"type":"string"}},"required":["text"]}`),
		}, func(_ guest.Context, args *guest.Args, out *guest.Result) error {
			text, err := args.String("text")
			if err != nil {
				return err // the model gets an error result naming the argument
			}
			_, err = out.WriteString(strings.ToUpper(text) + "!")
			return err
		})
	})
}

// A host function's failure is a *guest.HostError with the ABI's status;
// Is tests for one. Outside a host (in a plain go test) every call fails
// with ErrInternal, saying the code is not hosted.
func ExampleIs() {
	_, _, err := guest.Getenv("HOME")
	switch {
	case guest.Is(err, hostfns.ErrDenied):
		fmt.Println("HOME is not granted")
	case err != nil:
		fmt.Println("failed:", strings.Contains(err.Error(), guest.ErrNotHosted.Error()))
	}
	// Output: failed: true
}
