//! `#[frame]`: makes an `async fn` appear as a frame in asyncdump chains.
//!
//! The macro keeps the function's signature and wraps its body:
//! `async fn f(..) -> T { body }` becomes
//! `async fn f(..) -> T { framed_fn("module::f", async move { let r: T = body; r }).await }`,
//! with the call spanned at the function's name so the recorded location is the function's own line.
//! The type ascription keeps `?` and `return` inference identical to the original body (skipped when the
//! return type is `impl Trait`, which cannot be named there).

use proc_macro::TokenStream;
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
    let ident = &func.sig.ident;
    let name = match label {
        Some(label) => quote!(#label),
        None => {
            let ident = ident.to_string();
            quote!(::core::concat!(::core::module_path!(), "::", #ident))
        }
    };
    let body = &func.block;
    let ascribed = match &func.sig.output {
        ReturnType::Default => quote!(let __asyncdump_ret: () = #body; __asyncdump_ret),
        ReturnType::Type(_, ty) if !matches!(**ty, Type::ImplTrait(_)) => {
            quote!(let __asyncdump_ret: #ty = #body; __asyncdump_ret)
        }
        ReturnType::Type(..) => quote!(#body),
    };
    let call = quote_spanned! {ident.span()=>
        ::asyncdump_agent::__private::framed_fn(#name, __asyncdump_body).await
    };
    // The ascription's trailing read is unreachable for bodies that never return (`loop {}`).
    *func.block = syn::parse_quote!({
        #[allow(unreachable_code)]
        let __asyncdump_body = async move { #ascribed };
        #call
    });
    quote!(#func).into()
}
