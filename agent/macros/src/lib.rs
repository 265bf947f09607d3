//! `#[frame]`: makes an `async fn` appear as a frame in asyncdump chains.
//!
//! The macro turns `async fn f(args) -> T { body }` into
//! `fn f(args) -> impl Future<Output = T> { static META = ("module::f", here); framed_fn(&META, async move {
//! let r: T = body; r }) }`: one future per call, the body's own, wrapped once, its name and location in a
//! `static` so that the frame carries one pointer to them. (Keeping `async fn` and awaiting the wrapper inside it,
//! as tracing's `#[instrument]` does, adds a second state machine per level and copies each level's
//! future one more time: in the benchmarks that cost twice the time per frame.) The `static` is spanned at
//! the function's name, so the recorded location is the function's own line. The type ascription keeps `?` and
//! `return` inference identical to the original body (skipped when the return type is `impl Trait`, which
//! cannot be named there). The `impl Future` is spanned so that the 2024 capture rules apply in every
//! edition: like an `async fn`, the future captures every argument lifetime.

// Functions fit on a screen: clippy.toml sets the limit (80 lines), CI denies what goes over it.
#![warn(clippy::too_many_lines)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::{quote, quote_spanned};
use syn::{ItemFn, LitStr, ReturnType, Type, parse_macro_input, spanned::Spanned};

/// Records this `async fn` as a frame. `#[frame]` names it `module::fn`; `#[frame("label")]` uses the label.
#[proc_macro_attribute]
pub fn frame(attr: TokenStream, item: TokenStream) -> TokenStream {
    let label = if attr.is_empty() {
        None
    } else {
        Some(parse_macro_input!(attr as LitStr))
    };
    let mut func = parse_macro_input!(item as ItemFn);
    if func.sig.asyncness.is_none() {
        return syn::Error::new(
            func.sig.fn_token.span(),
            "#[frame] applies to `async fn`; for other futures use `.frame(\"label\")` from asyncdump_agent::FrameExt",
        )
        .to_compile_error()
        .into();
    }
    let ident = func.sig.ident.clone();
    let name = match label {
        Some(label) => quote!(#label),
        None => {
            let ident = ident.to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #ident))
        }
    };
    let body = &func.block;
    let (output, ascribed) = match &func.sig.output {
        ReturnType::Default => (
            quote!(()),
            quote!(let __asyncdump_ret: () = #body; __asyncdump_ret),
        ),
        ReturnType::Type(_, ty) if !matches!(**ty, Type::ImplTrait(_)) => (
            quote!(#ty),
            quote!(let __asyncdump_ret: #ty = #body; __asyncdump_ret),
        ),
        ReturnType::Type(_, ty) => (quote!(#ty), quote!(#body)),
    };
    // Spanned at the function's name: in a constant, `Location::caller()` is where it is written.
    let meta = quote_spanned! {ident.span()=>
        static __ASYNCDUMP_META: ::asyncdump_agent::__private::Meta =
            ::asyncdump_agent::__private::Meta::annotated_fn(#name, ::core::panic::Location::caller());
    };
    let future = quote_spanned!(Span::mixed_site()=> impl ::core::future::Future<Output = #output>);
    func.sig.asyncness = None;
    func.sig.output = syn::parse_quote!(-> #future);
    *func.block = syn::parse_quote!({
        // The ascription's trailing read is unreachable for bodies that never return (`loop {}`), and a
        // unit-typed `let` for `()` functions: both are artefacts of the expansion, not of the user's code.
        #[allow(unreachable_code, clippy::let_unit_value)]
        let __asyncdump_body = async move { #ascribed };
        #meta
        ::asyncdump_agent::__private::framed_fn(&__ASYNCDUMP_META, __asyncdump_body)
    });
    quote!(#func).into()
}
