// Package prompt builds an agent's system prompt from owned parts.
//
// Every fact in the prompt has one owner. Owners contribute through a
// Registry:
//
//   - sections: named, ordered blocks of text, static or computed per
//     assembly (the harness identity at order -100, the deployment persona
//     at 0, tool guidance at 100-199);
//   - variables: named values that section text references as {{name}},
//     computed per assembly, with "no value" a legitimate answer;
//   - tools: the name, description and JSON Schema the model is told about;
//   - assemble hooks: a waterfall around assembly that may read, add or
//     override sections and variables.
//
// Assemble resolves everything against an AssembleContext (the agent's
// facts) into an Assembly; Render turns an Assembly into the prompt text.
// Rendering is strict: every {{…}} must name a registered variable that has
// a value, and text that looks like a broken reference is an error, never
// shipped to the model. The rules are listed on Render.
//
// The package is pure Go and knows nothing of plugins or Wasm: the runtime
// registers on behalf of plugins, under exactly these rules.
package prompt
